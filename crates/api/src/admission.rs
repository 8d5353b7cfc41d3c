//! Admission checks for custom resources, evaluated locally.
//!
//! Given a CRD and a manifest, [`validate`] reports what a Kubernetes API
//! server would refuse when the manifest is applied with strict field
//! validation (kubectl's default):
//!
//! 1. `apiVersion`/`kind` must name a served version of the CRD;
//! 2. unknown fields are reported (the server would reject or prune them);
//! 3. the OpenAPI v3 schema: types, required fields, enums, ranges, patterns,
//!    lengths (validated with `jsonschema`, after translating the OpenAPI
//!    dialect: `nullable`, `x-kubernetes-int-or-string`);
//! 4. CEL `x-kubernetes-validations`, including transition rules against the
//!    old object (evaluated by kube's CEL engine, after schema defaults are
//!    applied, as the server does).
//!
//! The checks read only the CRD, so the rules declared on the Rust types are
//! written once and enforced identically here and by the API server.

pub mod cost;

use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use kube::core::cel::ErrorKind;
use serde_json::{Map, Value};

/// One reason an object is not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Path of the offending field, e.g. `spec.storage.size` (empty for the
    /// object as a whole).
    pub field: String,
    /// What is wrong and, where possible, what to do instead.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl Violation {
    /// A violation of `field` (empty for the object as a whole).
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Finds the CRD among `crds` that defines `object`'s kind and validates
/// `object` against it (and against `old` for transition rules).
///
/// Returns every violation found; an empty list means the object would be
/// admitted.
pub fn validate(
    crds: &[CustomResourceDefinition],
    object: &Value,
    old: Option<&Value>,
) -> Vec<Violation> {
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let kind = object.get("kind").and_then(Value::as_str);
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        return vec![Violation::new(
            "",
            "apiVersion and kind must be set (e.g. apiVersion: postgres.tusk.dev/v1alpha1, kind: PostgresCluster)",
        )];
    };
    let Some(crd) = crds.iter().find(|crd| crd.spec.names.kind == kind) else {
        let known: Vec<&str> = crds.iter().map(|c| c.spec.names.kind.as_str()).collect();
        return vec![Violation::new(
            "kind",
            format!(
                "{kind} is not one of the kinds checked here ({})",
                known.join(", ")
            ),
        )];
    };
    let Some(version) = served_version(crd, api_version) else {
        return vec![Violation::new(
            "apiVersion",
            format!(
                "{api_version} is not a served version of {kind}; use {}",
                crd.spec
                    .versions
                    .iter()
                    .filter(|v| v.served)
                    .map(|v| format!("{}/{}", crd.spec.group, v.name))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )];
    };
    if let Some(old) = old {
        let same_object = old.get("kind") == object.get("kind")
            && old.pointer("/metadata/name") == object.pointer("/metadata/name");
        if !same_object {
            return vec![Violation::new(
                "metadata.name",
                "the old and new objects must be the same kind and name",
            )];
        }
    }
    let Some(schema) = version_schema(version) else {
        return vec![Violation::new(
            "",
            format!("the CRD for {kind} has no openAPIV3Schema"),
        )];
    };
    AdmissionSchema::new(schema).validate(object, old)
}

/// Said, as kube-apiserver says it, when the schema refused the object and
/// its CEL rules were therefore not evaluated.
pub const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was \
     invalid; correct the existing errors to complete validation";

/// One CRD version's OpenAPI v3 schema with its checks compiled once: the
/// JSON Schema validator and every CEL rule. Exposed for API servers that
/// hold arbitrary CRDs. Kubernetes' API server compiles
/// a CRD's rules when the CRD is stored, not for every request; parsing them
/// again for every write costs milliseconds per object.
pub struct AdmissionSchema {
    schema: Value,
    structural: Result<jsonschema::Validator, String>,
    rules: kube::core::cel::CompiledSchema,
}

impl fmt::Debug for AdmissionSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl AdmissionSchema {
    /// Compiles `schema` (an `openAPIV3Schema`).
    pub fn new(schema: Value) -> Self {
        let structural = jsonschema::draft4::new(&to_json_schema(&schema))
            .map_err(|error| format!("the CRD schema is invalid: {error}"));
        let rules = kube::core::cel::compile_schema(&schema);
        Self {
            schema,
            structural,
            rules,
        }
    }

    /// The schema as the CRD declares it.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Every violation of `object` (against `old` for transition rules);
    /// empty when it would be admitted.
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Violation> {
        let mut violations = Vec::new();
        if object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_none()
            && object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .is_none()
        {
            violations.push(Violation::new(
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
        // Strict decoding refuses unknown fields before anything is
        // validated: they are all the server reports.
        let mut unknown = Vec::new();
        unknown_fields(&self.schema, object, "", &mut unknown);
        if !unknown.is_empty() {
            return unknown;
        }
        self.structural_violations(object, &mut violations);
        if !violations.is_empty() {
            // kube-apiserver evaluates the CEL rules only of an object the
            // schema admits, and says so.
            violations.push(Violation::new("", RULES_NOT_CHECKED));
            return violations;
        }
        if let Err(errors) = kube::core::cel::validate_compiled(&self.rules, object, old) {
            for error in errors.into_vec() {
                let field = error.field_path.trim_start_matches('.').to_owned();
                let message = match error.kind {
                    ErrorKind::EvaluationError => {
                        format!("a rule could not be evaluated: {}", error.message)
                    }
                    _ => error.message,
                };
                violations.push(Violation::new(field, message));
            }
        }
        violations
    }

    /// Type, required, enum, range, pattern and length violations.
    fn structural_violations(&self, object: &Value, out: &mut Vec<Violation>) {
        match &self.structural {
            Ok(validator) => {
                for error in validator.iter_errors(object) {
                    let mut field = field_path(object, error.instance_path().as_str());
                    // kube-apiserver names the missing field itself.
                    if let jsonschema::error::ValidationErrorKind::Required {
                        property: Value::String(property),
                    } = error.kind()
                    {
                        field = join_key(&field, property, false);
                        out.push(Violation::new(field, "Required value"));
                        continue;
                    }
                    out.push(Violation::new(field, error.to_string()));
                }
            }
            Err(message) => out.push(Violation::new("", message.clone())),
        }
    }
}

fn served_version<'c>(
    crd: &'c CustomResourceDefinition,
    api_version: &str,
) -> Option<&'c CustomResourceDefinitionVersion> {
    let (group, version) = api_version.split_once('/')?;
    if group != crd.spec.group {
        return None;
    }
    crd.spec
        .versions
        .iter()
        .find(|v| v.name == version && v.served)
}

fn version_schema(version: &CustomResourceDefinitionVersion) -> Option<Value> {
    let schema = version.schema.as_ref()?.open_api_v3_schema.as_ref()?;
    serde_json::to_value(schema).ok()
}

/// Reports fields the schema does not know. Kubernetes prunes them, and
/// `kubectl apply` (strict field validation) rejects them, so a typo never
/// silently loses a setting.
fn unknown_fields(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                // Every object has these; the server validates ObjectMeta itself.
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = join_key(path, key, properties.is_none() && additional.is_some());
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(child_schema), _) | (None, Some(child_schema)) => {
                        unknown_fields(child_schema, child, &child_path, out)
                    }
                    (None, None) => out.push(Violation::new(
                        child_path,
                        "unknown field (check its spelling and nesting)",
                    )),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    unknown_fields(item_schema, item, &format!("{path}[{index}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn join_key(path: &str, key: &str, map_entry: bool) -> String {
    if map_entry {
        format!("{path}[{key}]")
    } else if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Translates an OpenAPI v3 schema into plain JSON Schema (draft 4):
/// `nullable: true` becomes a `null` alternative, and
/// `x-kubernetes-int-or-string` an integer-or-string type.
fn to_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        // Maps of schemas: translate each schema.
                        "properties" | "definitions" | "patternProperties" => match value {
                            Value::Object(children) => Value::Object(
                                children
                                    .iter()
                                    .map(|(name, child)| (name.clone(), to_json_schema(child)))
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        // Enums and defaults are data, not schemas.
                        "enum" | "default" | "example" => value.clone(),
                        // Whole-number bounds read better as integers in messages.
                        "minimum" | "maximum" => whole_number(value),
                        _ => to_json_schema(value),
                    };
                    (key.clone(), value)
                })
                .collect();
            if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                out.remove("anyOf");
                out.insert("type".into(), serde_json::json!(["integer", "string"]));
            }
            if out.remove("nullable") == Some(Value::Bool(true))
                && let Some(Value::String(type_)) = out.get("type").cloned()
            {
                out.insert("type".into(), serde_json::json!([type_, "null"]));
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(to_json_schema).collect()),
        other => other.clone(),
    }
}

fn whole_number(value: &Value) -> Value {
    match value.as_f64() {
        Some(number) if number.fract() == 0.0 && number.abs() < 9.0e15 => {
            Value::from(number as i64)
        }
        _ => value.clone(),
    }
}

/// Turns a JSON pointer into Kubernetes' field path notation:
/// `/spec/tolerations/0/key` becomes `spec.tolerations[0].key`, and a map
/// entry `/spec/postgres/parameters/port` becomes `spec.postgres.parameters[port]`
/// only where the parent is a map of arbitrary keys (left as a dotted path here,
/// since the schema names it).
fn field_path(object: &Value, pointer: &str) -> String {
    let mut path = String::new();
    let mut current = Some(object);
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        match current {
            Some(Value::Array(items)) => {
                let index: Option<usize> = segment.parse().ok();
                path.push_str(&format!("[{segment}]"));
                current = index.and_then(|i| items.get(i));
            }
            other => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&segment);
                current = other.and_then(|v| v.get(&segment));
            }
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_pointers_become_kubernetes_field_paths() {
        let object = json!({"spec": {"tolerations": [{"key": "a"}]}});
        assert_eq!(
            field_path(&object, "/spec/tolerations/0/key"),
            "spec.tolerations[0].key"
        );
        assert_eq!(field_path(&object, ""), "");
        assert_eq!(field_path(&object, "/spec/missing"), "spec.missing");
    }

    #[test]
    fn nullable_and_int_or_string_translate_to_json_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": true, "enum": ["x"]},
                "b": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
            }
        });
        let translated = to_json_schema(&schema);
        assert_eq!(
            translated["properties"]["a"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(translated["properties"]["a"]["enum"], json!(["x", null]));
        assert_eq!(
            translated["properties"]["b"]["type"],
            json!(["integer", "string"])
        );
    }

    #[test]
    fn unknown_fields_are_reported_with_their_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}
            }
        });
        let object = json!({"spec": {"size": "1Gi", "sise": "2Gi", "labels": {"a": "b"}, "free": {"any": 1}}});
        let mut out = Vec::new();
        unknown_fields(&schema, &object, "", &mut out);
        assert_eq!(
            out,
            vec![Violation::new(
                "spec.sise",
                "unknown field (check its spelling and nesting)"
            )]
        );
    }
}
