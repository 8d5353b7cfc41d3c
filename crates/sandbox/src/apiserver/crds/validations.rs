//! `x-kubernetes-validations` of a CRD version's schema, checked as
//! apiextensions-apiserver checks them when the CRD is written: a rule is
//! required, messages are one line, `reason` is one of four, `fieldPath`
//! names a field the schema declares, and rule and `messageExpression` are
//! CEL that parses.
//!
//! kube-apiserver also type-checks expressions against the schema, which
//! the sandbox's CEL library (it parses without type-checking) does not do
//! here (see docs/sandbox.md). Rules over the cost budget are refused by
//! the CRD check itself, with `tusk_api::admission::cost`.

use kube::core::cel::cel::Program;
use serde_json::Value;

use crate::apiserver::error::Cause;

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Every node of `schema` with its field path, the root first.
fn nodes<'s>(schema: &'s Value, path: String, out: &mut Vec<(&'s Value, String)>) {
    out.push((schema, path.clone()));
    if let Some(items) = schema.get("items") {
        nodes(items, format!("{path}.items"), out);
    }
    for (key, child) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        nodes(child, format!("{path}.properties[{key}]"), out);
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        nodes(additional, format!("{path}.additionalProperties"), out);
    }
}

fn quoted(text: &str) -> String {
    Value::from(text).to_string()
}

fn has_line_breaks(text: &str) -> bool {
    text.contains(['\n', '\r'])
}

/// The rule violations of every node of `schema`, found at `path`. CEL is
/// parsed only when the schema (`sound`) and the declarations are sound, as
/// kube-apiserver does, so a broken schema is reported once.
pub fn violations(schema: &Value, path: &str, sound: bool) -> Vec<Cause> {
    let mut all = Vec::new();
    nodes(schema, path.to_owned(), &mut all);
    let mut out = Vec::new();
    for (node, node_path) in &all {
        declarations(node, node_path, &mut out);
    }
    if sound && out.is_empty() {
        for (node, node_path) in &all {
            expressions(node, node_path, &mut out);
        }
    }
    out
}

fn rules(node: &Value) -> impl Iterator<Item = (usize, &Value)> {
    node.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

fn text<'v>(rule: &'v Value, key: &str) -> &'v str {
    rule.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn declarations(node: &Value, path: &str, out: &mut Vec<Cause>) {
    for (index, rule) in rules(node) {
        let at = |key: &str| format!("{path}.x-kubernetes-validations[{index}].{key}");
        rule_and_message(rule, &at, out);
        message_expression(rule, &at, out);
        reason(rule, &at, out);
        field_path(rule, node, &at, out);
    }
}

/// The rule is required; its message is one line, not blank, and
/// required when the rule spans lines.
fn rule_and_message(rule: &Value, at: &dyn Fn(&str) -> String, out: &mut Vec<Cause>) {
    let expression = text(rule, "rule").trim();
    let message = text(rule, "message");
    if expression.is_empty() {
        out.push(Cause {
            field: at("rule"),
            message: "Required value: rule is not specified".into(),
            reason: "FieldValueRequired",
        });
    } else if !message.is_empty() && message.trim().is_empty() {
        out.push(Cause::invalid(
            at("message"),
            format!(
                "Invalid value: {}: message must be non-empty if specified",
                quoted(message)
            ),
        ));
    } else if message.len() > 2048 {
        let start: String = message.chars().take(10).collect();
        out.push(Cause::invalid(
            at("message"),
            format!(
                "Invalid value: {}: message must have a maximum length of 2048 characters",
                quoted(&format!("{start}..."))
            ),
        ));
    } else if has_line_breaks(message.trim()) {
        out.push(Cause::invalid(
            at("message"),
            format!(
                "Invalid value: {}: message must not contain line breaks",
                quoted(message)
            ),
        ));
    } else if has_line_breaks(expression) && message.trim().is_empty() {
        out.push(Cause {
            field: at("message"),
            message: "Required value: message must be specified if rule contains line breaks"
                .into(),
            reason: "FieldValueRequired",
        });
    }
}

fn message_expression(rule: &Value, at: &dyn Fn(&str) -> String, out: &mut Vec<Cause>) {
    let message_expression = text(rule, "messageExpression");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        out.push(Cause {
            field: at("messageExpression"),
            message: "Required value: messageExpression must be non-empty if specified".into(),
            reason: "FieldValueRequired",
        });
    }
}

fn reason(rule: &Value, at: &dyn Fn(&str) -> String, out: &mut Vec<Cause>) {
    if let Some(reason) = rule.get("reason").and_then(Value::as_str)
        && !REASONS.contains(&reason)
    {
        let supported: Vec<String> = REASONS.iter().map(|r| quoted(r)).collect();
        out.push(Cause {
            field: at("reason"),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                quoted(reason),
                supported.join(", ")
            ),
            reason: "FieldValueNotSupported",
        });
    }
}

/// A fieldPath is one line, not blank, and names a declared field.
fn field_path(rule: &Value, node: &Value, at: &dyn Fn(&str) -> String, out: &mut Vec<Cause>) {
    let field_path = text(rule, "fieldPath");
    if !field_path.is_empty() && field_path.trim().is_empty() {
        out.push(Cause::invalid(
            at("fieldPath"),
            format!(
                "Invalid value: {}: fieldPath must be non-empty if specified",
                quoted(field_path)
            ),
        ));
    }
    if has_line_breaks(field_path) {
        out.push(Cause::invalid(
            at("fieldPath"),
            format!(
                "Invalid value: {}: fieldPath must not contain line breaks",
                quoted(field_path)
            ),
        ));
    }
    if !field_path.is_empty()
        && let Err(error) = field_path_target(field_path, node)
    {
        out.push(Cause::invalid(
            at("fieldPath"),
            format!(
                "Invalid value: {}: fieldPath must be a valid path: {error}",
                quoted(field_path)
            ),
        ));
    }
}

fn expressions(node: &Value, path: &str, out: &mut Vec<Cause>) {
    for (index, rule) in rules(node) {
        for key in ["rule", "messageExpression"] {
            let expression = text(rule, key);
            if expression.trim().is_empty() {
                continue;
            }
            if let Err(error) = Program::compile(expression) {
                out.push(Cause::invalid(
                    format!("{path}.x-kubernetes-validations[{index}].{key}"),
                    format!(
                        "Invalid value: {}: compilation failed: {}",
                        quoted(expression),
                        one_line(&error.to_string())
                    ),
                ));
            }
        }
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The schema a rule's `fieldPath` points at, relative to the node that
/// declares the rule: `.name` and `['name']` step into a declared property,
/// or into a map's values through `additionalProperties`.
fn field_path_target<'s>(path: &str, schema: &'s Value) -> Result<&'s Value, String> {
    let mut rest = path;
    let mut current = schema;
    while !rest.is_empty() {
        let (name, after) = if let Some(tail) = rest.strip_prefix('.') {
            let end = tail.find(['.', '[']).unwrap_or(tail.len());
            (tail[..end].to_owned(), &tail[end..])
        } else if let Some(tail) = rest.strip_prefix('[') {
            let Some(quoted) = tail.strip_prefix('\'') else {
                let got: String = tail.chars().take_while(|c| *c != ']').collect();
                return Err(format!("expected single quoted string but got {got}"));
            };
            let Some(end) = quoted.find("']") else {
                return Err(format!("unterminated string in {path}"));
            };
            (quoted[..end].to_owned(), &quoted[end + 2..])
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        };
        if name.is_empty() {
            return Err("does not refer to a valid field".into());
        }
        current = match current.get("properties").and_then(|p| p.get(&name)) {
            Some(child) => child,
            None => match current
                .get("additionalProperties")
                .filter(|a| a.is_object())
            {
                Some(values) => values,
                None => return Err("does not refer to a valid field".into()),
            },
        };
        rest = after;
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_step_through_properties_and_map_values() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "a.b": {"type": "string"}}}}});
        assert!(field_path_target(".spec.labels['x/y']", &schema).is_ok());
        assert!(field_path_target(".spec['a.b']", &schema).is_ok());
        assert_eq!(
            field_path_target(".spec.missing", &schema).err().as_deref(),
            Some("does not refer to a valid field")
        );
        assert_eq!(
            field_path_target(".spec[0]", &schema).err().as_deref(),
            Some("expected single quoted string but got 0")
        );
        assert_eq!(
            field_path_target("spec", &schema).err().as_deref(),
            Some("expected [ or . but got: spec")
        );
    }
}
