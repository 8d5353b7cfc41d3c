//! The static cost of a CRD's CEL rules, estimated as kube-apiserver
//! estimates it when the CRD is written, and the refusals that follow.
//!
//! Each rule and `messageExpression` is estimated against the declared type
//! of its schema node, with the size bounds of [`decl`]. A rule's estimate
//! is multiplied by how many times its node can occur in one object (the
//! product of the `maxItems`/`maxProperties` of the lists and maps above
//! it; where one is unbounded, the request size divided by the node's
//! smallest serialized size). kube-apiserver refuses:
//!
//! - a rule whose multiplied cost exceeds [`PER_EXPRESSION_LIMIT`]
//!   (`estimated rule cost exceeds budget by factor of 2.5x ...`);
//! - a `messageExpression` whose own cost does
//!   (`estimated messageExpression cost exceeds budget ...`);
//! - a schema whose rules and messages together exceed
//!   [`SCHEMA_LIMIT`], naming the (up to four) most expensive ones.
//!
//! The estimate of an expression follows the real checker's model
//! construct by construct ([`expr`], [`functions`]); where it cannot tell
//! which of several costs applies it takes the highest, so it may refuse a
//! rule kube-apiserver accepts but not the other way round. A differential
//! test (`crates/cli/tests/referee_cel_cost.rs`) holds the two together.

pub mod decl;
pub mod expr;
mod functions;
pub mod range;

use kube::core::cel::cel::parser::Parser;
use serde_json::Value;

use decl::Decl;
use expr::Estimator;

pub use super::Violation;

/// The most one rule (times its cardinality) or message may cost.
pub const PER_EXPRESSION_LIMIT: u64 = 10_000_000;
/// The most all rules and messages of one schema may cost together.
pub const SCHEMA_LIMIT: u64 = 100_000_000;
/// Expressions cheaper than this are not named when the schema's total is
/// over its limit.
const NAMED_SHARE: u64 = SCHEMA_LIMIT / 100;

/// The estimated cost of `expression` with `self` declared as `decl`;
/// `None` when it does not parse.
pub fn expression_cost(expression: &str, decl: &Decl) -> Option<u64> {
    let parsed = Parser::new().parse(expression).ok()?;
    Some(Estimator::new(decl).estimate(&parsed).cost.max)
}

/// Whether an estimate is of a rule or of its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Rule,
    MessageExpression,
}

/// One expression's estimate, as kube-apiserver weighs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpressionCost {
    /// `<schema path>.x-kubernetes-validations[i].rule` (or
    /// `.messageExpression`).
    pub field: String,
    pub part: Part,
    /// The expression's own estimate.
    pub cost: u64,
    /// How many times the rule can be evaluated for one object (1 for a
    /// message, which is charged once).
    pub cardinality: u64,
}

impl ExpressionCost {
    /// What counts against the limits: the cost times the cardinality.
    pub fn charged(&self) -> u64 {
        if self.cost == 0 {
            0
        } else {
            self.cost.saturating_mul(self.cardinality)
        }
    }
}

/// The estimates of every rule and message of one version's schema, found
/// at `path` (`spec.validation.openAPIV3Schema`, or
/// `spec.versions[i].schema.openAPIV3Schema`), children before parents.
pub fn schema_costs(schema: &Value, path: &str) -> Vec<ExpressionCost> {
    let mut out = Vec::new();
    walk(schema, path, true, Some(1), &mut out);
    out
}

/// What kube-apiserver refuses of `schema`'s rules for their cost.
pub fn violations(schema: &Value, path: &str) -> Vec<Violation> {
    refusals(schema, path, true)
}

/// What kube-apiserver refuses of a schema an update leaves unchanged:
/// only a total over [`SCHEMA_LIMIT`] (it does not hold rules already
/// stored to the per-expression limit again).
pub fn total_violations(schema: &Value, path: &str) -> Vec<Violation> {
    refusals(schema, path, false)
}

fn refusals(schema: &Value, path: &str, each: bool) -> Vec<Violation> {
    let costs = schema_costs(schema, path);
    let mut out = Vec::new();
    for expression in costs.iter().filter(|_| each) {
        let (name, charged) = match expression.part {
            Part::Rule => ("estimated rule cost", expression.charged()),
            Part::MessageExpression => ("estimated messageExpression cost", expression.cost),
        };
        if charged > PER_EXPRESSION_LIMIT {
            out.push(Violation::new(
                expression.field.clone(),
                over_budget(name, charged, PER_EXPRESSION_LIMIT),
            ));
        }
    }
    let total = costs
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.charged()));
    if total > SCHEMA_LIMIT {
        let mut expensive: Vec<&ExpressionCost> = costs
            .iter()
            .filter(|e| e.charged() >= NAMED_SHARE)
            .collect();
        expensive.sort_by_key(|e| std::cmp::Reverse(e.charged()));
        for expression in expensive.into_iter().take(4) {
            out.push(Violation::new(
                expression.field.clone(),
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        out.push(Violation::new(
            path,
            over_budget(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                total,
                SCHEMA_LIMIT,
            ),
        ));
    }
    out
}

/// kube-apiserver's sentence for a cost over its limit.
pub fn over_budget(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding \
         maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// How many of each child a node holds: a list's `maxItems`, a map's
/// `maxProperties` (`None`: unbounded), one for anything else.
fn children_per_node(schema: &Value) -> Option<u64> {
    let bound = |key: &str| schema.get(key).map(|v| v.as_u64().unwrap_or(0));
    match schema.get("type").and_then(Value::as_str) {
        Some("object") if schema.get("additionalProperties").is_some() => bound("maxProperties"),
        Some("array") => bound("maxItems"),
        _ => Some(1),
    }
}

fn walk(
    schema: &Value,
    path: &str,
    root: bool,
    cardinality: Option<u64>,
    out: &mut Vec<ExpressionCost>,
) {
    let child_cardinality =
        cardinality.and_then(|c| children_per_node(schema).map(|n| c.saturating_mul(n)));
    if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        walk(
            values,
            &format!("{path}.additionalProperties"),
            false,
            child_cardinality,
            out,
        );
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let mut names: Vec<&String> = properties.keys().collect();
        names.sort();
        for name in names {
            walk(
                &properties[name],
                &format!("{path}.properties[{name}]"),
                false,
                child_cardinality,
                out,
            );
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        walk(
            items,
            &format!("{path}.items"),
            false,
            child_cardinality,
            out,
        );
    }
    rules(schema, path, root, cardinality, out);
}

fn rules(
    schema: &Value,
    path: &str,
    root: bool,
    cardinality: Option<u64>,
    out: &mut Vec<ExpressionCost>,
) {
    let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    else {
        return;
    };
    let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    let Some(decl) = Decl::of_schema(schema, root || embedded) else {
        return;
    };
    // Where a list or map above is unbounded, the node can occur as often
    // as its smallest JSON fits in a request.
    let cardinality =
        cardinality.unwrap_or(decl::MAX_REQUEST_SIZE_BYTES / (decl.min_serialized_size + 1));
    for (index, rule) in rules.iter().enumerate() {
        let text = |key: &str| rule.get(key).and_then(Value::as_str).unwrap_or_default();
        let at = format!("{path}.x-kubernetes-validations[{index}]");
        if text("rule").trim().is_empty() {
            continue;
        }
        let Some(cost) = expression_cost(text("rule"), &decl) else {
            continue;
        };
        out.push(ExpressionCost {
            field: format!("{at}.rule"),
            part: Part::Rule,
            cost,
            cardinality,
        });
        if !text("messageExpression").is_empty()
            && let Some(cost) = expression_cost(text("messageExpression"), &decl)
        {
            out.push(ExpressionCost {
                field: format!("{at}.messageExpression"),
                part: Part::MessageExpression,
                cost,
                cardinality: 1,
            });
        }
    }
}

#[cfg(test)]
mod tests;
