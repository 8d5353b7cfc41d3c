//! Structural-schema rules for a CRD version's `openAPIV3Schema`, as
//! apiextensions-apiserver checks them before serving a version: every
//! node says its type, arrays say their items, the root is an object whose
//! `metadata` may only declare `name` and `generateName`, and logical
//! junctors (`anyOf`, `allOf`, `oneOf`, `not`) only constrain values the
//! structure already declares.

use serde_json::{Map, Value};

use crate::apiserver::error::Cause;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The structural violations of `schema`, found at `path`.
pub fn violations(schema: &Value, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    node(schema, Level::Root, path, &mut out);
    out
}

fn flag(node: &Map<String, Value>, key: &str) -> bool {
    node.get(key) == Some(&Value::Bool(true))
}

fn forbidden(field: String, message: &str) -> Cause {
    Cause {
        field,
        message: format!("Forbidden: {message}"),
        reason: "FieldValueForbidden",
    }
}

fn required(field: String, message: &str) -> Cause {
    Cause {
        field,
        message: format!("Required value: {message}"),
        reason: "FieldValueRequired",
    }
}

fn invalid(field: String, value: &Value, message: &str) -> Cause {
    Cause::invalid(field, format!("Invalid value: {value}: {message}"))
}

fn node(schema: &Value, level: Level, path: &str, out: &mut Vec<Cause>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    descend(map, level, path, out);
    extensions(map, path, out);
    junctors(map, level, path, out);
    types(map, level, path, out);
    identity(map, level, path, out);
}

fn type_of(map: &Map<String, Value>) -> &str {
    map.get("type").and_then(Value::as_str).unwrap_or_default()
}

fn properties_of(map: &Map<String, Value>) -> Option<&Map<String, Value>> {
    map.get("properties").and_then(Value::as_object)
}

/// Array items, properties and additionalProperties, each a node of its own.
fn descend(map: &Map<String, Value>, level: Level, path: &str, out: &mut Vec<Cause>) {
    if type_of(map) == "array" && !map.contains_key("items") {
        out.push(required(format!("{path}.items"), "must be specified"));
    }
    if let Some(items) = map.get("items") {
        node(items, Level::Item, &format!("{path}.items"), out);
    }
    let properties = properties_of(map);
    for (key, child) in properties.into_iter().flatten() {
        node(
            child,
            Level::Field,
            &format!("{path}.properties[{key}]"),
            out,
        );
    }
    if let Some(additional) = map.get("additionalProperties") {
        if level == Level::Root {
            out.push(forbidden(
                format!("{path}.additionalProperties"),
                "must not be used at the root",
            ));
        }
        if properties.is_some_and(|p| !p.is_empty()) && additional.is_object() {
            out.push(forbidden(
                format!("{path}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        node(
            additional,
            Level::Field,
            &format!("{path}.additionalProperties"),
            out,
        );
    }
}

fn extensions(map: &Map<String, Value>, path: &str, out: &mut Vec<Cause>) {
    if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if flag(map, "x-kubernetes-int-or-string") && flag(map, "x-kubernetes-preserve-unknown-fields")
    {
        out.push(invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
}

/// Every node has a type, unless int-or-string or preserving unknown
/// fields; the root is an object.
fn types(map: &Map<String, Value>, level: Level, path: &str, out: &mut Vec<Cause>) {
    let type_ = type_of(map);
    if type_.is_empty()
        && !flag(map, "x-kubernetes-int-or-string")
        && !flag(map, "x-kubernetes-preserve-unknown-fields")
    {
        let message = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(required(format!("{path}.type"), message));
    }
    if level == Level::Root && !type_.is_empty() && type_ != "object" {
        out.push(invalid(
            format!("{path}.type"),
            &Value::from(type_),
            "must be object at the root",
        ));
    }
}

/// kind, apiVersion and metadata of the root and of embedded resources.
fn identity(map: &Map<String, Value>, level: Level, path: &str, out: &mut Vec<Cause>) {
    let properties = properties_of(map);
    let check_metadata = level == Level::Root || flag(map, "x-kubernetes-embedded-resource");
    if check_metadata {
        for key in ["kind", "apiVersion"] {
            if let Some(child) = properties.and_then(|p| p.get(key)) {
                let child_type = child.get("type").cloned().unwrap_or(Value::from(""));
                if child_type != "string" {
                    out.push(invalid(
                        format!("{path}.properties[{key}].type"),
                        &child_type,
                        "must be string",
                    ));
                }
            }
        }
    }
    if let Some(metadata) = properties.and_then(|p| p.get("metadata")) {
        root_metadata(
            metadata,
            check_metadata,
            level,
            &format!("{path}.properties[metadata]"),
            out,
        );
    }
}

/// `metadata` belongs to the API server: a root schema may only restate
/// that it is an object with `name` and `generateName` strings.
fn root_metadata(metadata: &Value, check: bool, level: Level, path: &str, out: &mut Vec<Cause>) {
    let type_ = metadata.get("type").cloned().unwrap_or(Value::from(""));
    if check && type_ != "object" {
        out.push(invalid(format!("{path}.type"), &type_, "must be object"));
    }
    if level != Level::Root {
        return;
    }
    let Some(map) = metadata.as_object() else {
        return;
    };
    let names_only = map
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|properties| {
            properties
                .keys()
                .all(|k| k == "name" || k == "generateName")
                && properties.values().all(|p| {
                    p.as_object().is_some_and(|p| {
                        p.keys().all(|k| k == "type")
                            && p.get("type") == Some(&Value::from("string"))
                    })
                })
        });
    let only_known_keys = map.keys().all(|k| k == "type" || k == "properties");
    if !names_only || !only_known_keys {
        out.push(forbidden(
            path.to_owned(),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// `[{type: integer}, {type: string}]`, the spelling of int-or-string that
/// may carry types inside a junctor.
fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    any_of == Some(&serde_json::json!([{"type": "integer"}, {"type": "string"}]))
}

fn junctors(map: &Map<String, Value>, level: Level, path: &str, out: &mut Vec<Cause>) {
    let skip_any_of = is_int_or_string_any_of(map.get("anyOf"));
    for junctor in ["anyOf", "allOf", "oneOf"] {
        if junctor == "anyOf" && skip_any_of {
            continue;
        }
        for (index, nested) in map
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let skip =
                junctor == "allOf" && index == 0 && is_int_or_string_any_of(nested.get("anyOf"));
            nested_node(
                nested,
                skip,
                level,
                &format!("{path}.{junctor}[{index}]"),
                out,
            );
        }
    }
    if let Some(not) = map.get("not") {
        nested_node(not, false, level, &format!("{path}.not"), out);
    }
}

/// Inside a junctor a schema may only validate values: anything that
/// would change the structure is refused.
fn nested_node(schema: &Value, skip_any_of: bool, level: Level, path: &str, out: &mut Vec<Cause>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    let mut inner = map.clone();
    if skip_any_of {
        inner.remove("anyOf");
    }
    junctors(&inner, level, path, out);
    if let Some(items) = map.get("items") {
        nested_node(items, false, level, &format!("{path}.items"), out);
    }
    for (key, child) in map
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        nested_node(
            child,
            false,
            Level::Field,
            &format!("{path}.properties[{key}]"),
            out,
        );
    }
    structure_changes(map, path, out);
}

/// What a schema inside a junctor must leave unset, and kube-apiserver's
/// message for each.
const STRUCTURE_KEYS: [(&str, &str); 12] = [
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    (
        "x-kubernetes-preserve-unknown-fields",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-embedded-resource",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-int-or-string",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    ),
    (
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    ),
    ("x-kubernetes-validations", "must be empty to be structural"),
];

fn structure_changes(map: &Map<String, Value>, path: &str, out: &mut Vec<Cause>) {
    for (key, message) in STRUCTURE_KEYS {
        let set = match map.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            out.push(forbidden(format!("{path}.{key}"), message));
        }
    }
    if map.contains_key("x-kubernetes-map-type") {
        out.push(forbidden(
            format!("{path}.x-kubernetes-map-type"),
            "must be undefined to be structural",
        ));
    }
    if map
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("metadata"))
    {
        out.push(forbidden(
            format!("{path}.properties[metadata]"),
            "must not be specified in a nested context",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_or_string_may_carry_types_in_its_any_of_and_nothing_else_may() {
        let schema = json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true,
                     "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "size": {"type": "string", "oneOf": [{"type": "string"}]}}});
        let fields: Vec<String> = violations(&schema, "s")
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, vec!["s.properties[size].oneOf[0].type".to_owned()]);
    }

    #[test]
    fn the_project_crds_are_structural() {
        for crd in tusk_api::crds() {
            let crd = serde_json::to_value(&crd).expect("serialises");
            let causes = crate::apiserver::crds::validate(&crd);
            assert!(causes.is_empty(), "{causes:?}");
        }
    }
}
