//! Table tests of the cost estimate, one construct a row. Each expected
//! figure is worked out by hand from kube-apiserver's cost model: one unit
//! for an identifier and for a field selected from an object or map, none
//! for a literal or a presence test, a tenth of a unit per character
//! walked, a quarter per character of a regular expression for each
//! character matched, ten for a list literal, and a macro's step times the
//! size of its range.

use serde_json::{Value, json};

use super::decl::Decl;
use super::*;

/// `name` holds 10 characters (40 bytes), `items` 5 strings of 8 (32),
/// `labels` 4 entries of 16 (64); `free` is unbounded.
fn schema() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10},
        "items": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 8}},
        "labels": {"type": "object", "maxProperties": 4,
                   "additionalProperties": {"type": "string", "maxLength": 16}},
        "n": {"type": "integer"},
        "free": {"type": "string"},
    }})
}

fn cost(expression: &str) -> u64 {
    let decl = Decl::of_schema(&schema(), false).expect("the test schema declares a type");
    expression_cost(expression, &decl).expect("the test expression parses")
}

#[test]
fn each_construct_costs_what_kube_apiserver_estimates() {
    let table: &[(&str, &str, u64)] = &[
        ("integer comparison", "self.n >= 1", 3),
        ("presence test", "has(self.name)", 1),
        ("string equality walks the shorter", "self.name == 'abc'", 3),
        (
            "both sides of a transition rule",
            "self.name == oldSelf.name",
            8,
        ),
        (
            "startsWith walks its argument",
            "self.name.startsWith('ab')",
            3,
        ),
        (
            "matches: text times pattern",
            "self.name.matches('^[a-z]+$')",
            12,
        ),
        (
            "matches on an unbounded string",
            "self.free.matches('^[a-z]+$')",
            629_148,
        ),
        (
            "lowerAscii walks its target",
            "self.name.lowerAscii() == 'abc'",
            7,
        ),
        (
            "all over map keys",
            "self.labels.all(k, k.startsWith('a'))",
            23,
        ),
        (
            "exists with contains",
            "self.items.exists(x, x.contains('ab'))",
            48,
        ),
        ("exists_one", "self.items.exists_one(x, x == 'a')", 24),
        (
            "filter, then size",
            "size(self.items.filter(x, x.startsWith('a'))) > 0",
            90,
        ),
        (
            "in a list literal",
            "self.items.all(x, x in ['a', 'b'])",
            83,
        ),
        (
            "ternaries summed",
            "(has(self.name) ? 1 : 0) + (has(self.n) ? 1 : 0) <= 1",
            4,
        ),
        (
            "a map's value by key",
            "self.labels.all(k, self.labels[k] == 'x')",
            35,
        ),
        (
            "quantities",
            "quantity(self.name).isGreaterThan(quantity('0'))",
            8,
        ),
        ("string concatenation", "'x: ' + self.name", 7),
        (
            "the first key a filter keeps",
            "'bad: ' + self.labels.filter(k, k.startsWith('a'))[0]",
            75,
        ),
    ];
    let mut wrong = Vec::new();
    for (construct, expression, expected) in table {
        let actual = cost(expression);
        if actual != *expected {
            wrong.push(format!(
                "{construct}: `{expression}` costs {actual}, not {expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn joining_keys_is_unbounded() {
    // The keys a filter keeps have no declared size: joining them is
    // estimated at the largest size there is.
    let joined = cost("self.labels.filter(k, k.startsWith('a')).join(', ')");
    assert!(joined > PER_EXPRESSION_LIMIT, "{joined}");
}

#[test]
fn a_rule_under_a_bounded_list_is_charged_once_per_item() {
    let schema = json!({"type": "object", "properties": {"items": {
        "type": "array", "maxItems": 5,
        "items": {"type": "string", "maxLength": 10,
                  "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]}
    }}});
    let costs = schema_costs(&schema, "spec.validation.openAPIV3Schema");
    assert_eq!(
        costs,
        vec![ExpressionCost {
            field: "spec.validation.openAPIV3Schema.properties[items].items\
                    .x-kubernetes-validations[0].rule"
                .into(),
            part: Part::Rule,
            cost: 2,
            cardinality: 5,
        }]
    );
}

#[test]
fn an_unbounded_list_multiplies_by_what_fits_in_a_request() {
    let schema = json!({"type": "object", "properties": {"items": {
        "type": "array",
        "items": {"type": "object", "required": ["a"],
                  "properties": {"a": {"type": "string", "maxLength": 1}},
                  "x-kubernetes-validations": [{"rule": "self.a == 'x'"}]}
    }}});
    let costs = schema_costs(&schema, "p");
    // {"a":""} is 9 bytes, one more for a comma.
    assert_eq!(costs[0].cardinality, 3_145_728 / 10);
}

#[test]
fn a_rule_over_budget_is_refused_with_its_factor() {
    let schema = json!({"type": "object", "properties": {"items": {
        "type": "array", "maxItems": 100,
        "items": {"type": "string",
                  "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')"}]}
    }}});
    // 629,147 a string, 100 strings: 62,914,700, 6.3 times the limit.
    let violations = violations(&schema, "s");
    assert_eq!(
        violations,
        vec![Violation::new(
            "s.properties[items].items.x-kubernetes-validations[0].rule",
            over_budget("estimated rule cost", 62_914_700, PER_EXPRESSION_LIMIT),
        )]
    );
    assert!(violations[0].message.contains("factor of 6.3x"));
}

#[test]
fn a_message_expression_over_budget_is_refused() {
    let schema = json!({"type": "object", "properties": {"tags": {
        "type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{
            "rule": "true",
            "messageExpression": "self.join(', ')",
        }]
    }}});
    let violations = violations(&schema, "s");
    // The message alone is over the schema's total too.
    assert_eq!(violations.len(), 3, "{violations:?}");
    assert_eq!(
        violations[0].field,
        "s.properties[tags].x-kubernetes-validations[0].messageExpression"
    );
    assert!(
        violations[0].message.starts_with(
            "estimated messageExpression cost exceeds budget by factor of more than 100x"
        ),
        "{}",
        violations[0].message
    );
}

#[test]
fn a_schema_over_its_total_is_refused_naming_the_most_expensive() {
    // Twenty rules of 6,291,470 each: every one under its own limit,
    // 125,829,400 together.
    let rules: Vec<Value> = (0..20)
        .map(|_| json!({"rule": "self.matches('^[a-z]+$')"}))
        .collect();
    let schema = json!({"type": "object", "properties": {"items": {
        "type": "array", "maxItems": 10,
        "items": {"type": "string", "x-kubernetes-validations": rules}
    }}});
    let violations = violations(&schema, "s");
    assert_eq!(violations.len(), 5, "{violations:?}");
    assert_eq!(
        violations[0].message,
        "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
    );
    assert_eq!(violations[4].field, "s");
    assert_eq!(
        violations[4].message,
        over_budget(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            125_829_400,
            SCHEMA_LIMIT
        )
    );
}

#[test]
fn factors_are_printed_as_kube_apiserver_prints_them() {
    let message = |cost| over_budget("estimated rule cost", cost, PER_EXPRESSION_LIMIT);
    assert!(message(12_000_000).contains("factor of 1.200000x"));
    assert!(message(25_000_000).contains("factor of 2.5x"));
    assert!(message(1_000_000_001).contains("factor of more than 100x"));
}

#[test]
fn tusks_own_crds_are_within_budget() {
    for crd in crate::crds() {
        let crd = serde_json::to_value(&crd).expect("a CRD serializes");
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let refused = violations(schema, "spec.validation.openAPIV3Schema");
        assert!(refused.is_empty(), "{refused:#?}");
    }
}

#[test]
fn library_functions_and_literal_ranges_cost_what_kube_apiserver_estimates() {
    let table: &[(&str, &str, u64)] = &[
        // Each step adds [x.lowerAscii()] (17); the mapped list has no
        // path, so its items are sized from `self` (0).
        (
            "map, then all",
            "self.items.map(x, x.lowerAscii()).all(x, x.size() < 10)",
            129,
        ),
        ("split walks twice", "self.name.split('-').size() <= 3", 12),
        (
            "join: items and separators",
            "self.items.join(',').size() < 100",
            21,
        ),
        (
            "replace walks twice",
            "self.name.replace('-', '_') != 'x'",
            11,
        ),
        ("in a map is one unit", "'a' in self.labels", 3),
        ("in a list, one unit an item", "self.name in self.items", 9),
        ("strings compared", "self.name < self.free", 8),
        ("lists concatenated", "self.items + ['x'] == self.items", 16),
        (
            "a literal list as range",
            "[1, 2, 3].exists(x, x == self.n)",
            32,
        ),
        (
            "find: text times pattern",
            "self.free.find('[0-9]+') != ''",
            629_148,
        ),
        ("indexOf walks the string", "self.name.indexOf('-') >= 0", 7),
        ("isSorted compares strings", "self.items.isSorted()", 27),
    ];
    let mut wrong = Vec::new();
    for (construct, expression, expected) in table {
        let actual = cost(expression);
        if actual != *expected {
            wrong.push(format!(
                "{construct}: `{expression}` costs {actual}, not {expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
