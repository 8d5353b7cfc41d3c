//! Admission of one object version: what the API server decodes, defaults,
//! prunes and validates before storing.
//!
//! Built-in kinds are decoded into their `k8s-openapi` types and encoded
//! again, so wrong types are refused and unknown fields found; then the
//! defaults of [`crate::apiserver::admission::defaults`] apply. Custom resources go through their
//! CRD version's schema: defaults, pruning of unknown fields, structural
//! validation and CEL rules (`tusk_api::admission`), and a failure answers
//! 422 with one cause per field, as Kubernetes does.

pub mod defaults;
mod pods;
pub mod service_account;
pub mod workloads;

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value};

use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::resources::Resource;

/// The `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// An admitted object and the warnings to send back.
pub struct Admitted {
    pub object: Value,
    pub warnings: Vec<String>,
}

pub fn admit(
    resource: &Resource,
    version: &str,
    old: Option<&Value>,
    object: Value,
    validation: FieldValidation,
) -> Result<Admitted, ApiError> {
    if resource.custom {
        admit_custom(resource, version, old, object, validation)
    } else {
        admit_builtin(resource, object, validation)
    }
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn unknown_fields_error(
    resource: &Resource,
    version: &str,
    unknown: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let listed: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    match validation {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            listed.join(", "),
            kind = resource.kind
        ))),
        FieldValidation::Warn => Ok(listed),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

fn admit_custom(
    resource: &Resource,
    version: &str,
    old: Option<&Value>,
    object: Value,
    validation: FieldValidation,
) -> Result<Admitted, ApiError> {
    let Some(schema) = resource.version(version).and_then(|v| v.schema.clone()) else {
        return Err(ApiError::internal(format!(
            "{} has no schema for version {version}",
            resource.qualified_kind()
        )));
    };
    let mut object = kube::core::cel::apply_defaults(schema.schema(), &object);
    let mut unknown = Vec::new();
    prune(schema.schema(), &mut object, "", &mut unknown);
    let warnings = unknown_fields_error(resource, version, &unknown, validation)?;
    let violations = schema.validate(&object, old);
    if !violations.is_empty() {
        let causes = violations
            .into_iter()
            .map(|v| Cause::invalid(v.field, v.message))
            .collect();
        return Err(ApiError::invalid(
            &resource.qualified_kind(),
            &name_of(&object),
            causes,
        ));
    }
    Ok(Admitted { object, warnings })
}

/// Removes fields the schema does not declare (unless it preserves unknown
/// fields), recording their paths.
fn prune(schema: &Value, value: &mut Value, path: &str, pruned: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && schema.get("properties").is_none()
    {
        return;
    }
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (properties.and_then(|p| p.get(&key)), additional) {
                    (Some(child_schema), _) | (None, Some(child_schema)) => {
                        if let Some(child) = map.get_mut(&key) {
                            prune(child_schema, child, &child_path, pruned);
                        }
                    }
                    (None, None) if !preserve => {
                        map.remove(&key);
                        pruned.push(child_path);
                    }
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &format!("{path}[{index}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// Decodes into the typed struct and encodes again.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(
    object: &Value,
) -> Result<Value, String> {
    let typed: T = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

fn normalize(resource: &Resource, object: &Value) -> Result<Value, String> {
    use api::core::v1 as core;
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Namespace") => round_trip::<core::Namespace>(object),
        ("", "Pod") => round_trip::<core::Pod>(object),
        ("", "Service") => round_trip::<core::Service>(object),
        ("", "Endpoints") => round_trip::<core::Endpoints>(object),
        ("", "ConfigMap") => round_trip::<core::ConfigMap>(object),
        ("", "Secret") => round_trip::<core::Secret>(object),
        ("", "PersistentVolumeClaim") => round_trip::<core::PersistentVolumeClaim>(object),
        ("", "PersistentVolume") => round_trip::<core::PersistentVolume>(object),
        ("", "ServiceAccount") => round_trip::<core::ServiceAccount>(object),
        ("", "Node") => round_trip::<core::Node>(object),
        ("", "Event") => round_trip::<core::Event>(object),
        ("events.k8s.io", "Event") => round_trip::<api::events::v1::Event>(object),
        ("policy", "PodDisruptionBudget") => {
            round_trip::<api::policy::v1::PodDisruptionBudget>(object)
        }
        ("apps", "Deployment") => round_trip::<api::apps::v1::Deployment>(object),
        ("apps", "ReplicaSet") => round_trip::<api::apps::v1::ReplicaSet>(object),
        ("coordination.k8s.io", "Lease") => round_trip::<api::coordination::v1::Lease>(object),
        ("rbac.authorization.k8s.io", "Role") => round_trip::<api::rbac::v1::Role>(object),
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            round_trip::<api::rbac::v1::RoleBinding>(object)
        }
        ("rbac.authorization.k8s.io", "ClusterRole") => {
            round_trip::<api::rbac::v1::ClusterRole>(object)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            round_trip::<api::rbac::v1::ClusterRoleBinding>(object)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            round_trip::<api::admissionregistration::v1::ValidatingWebhookConfiguration>(object)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            round_trip::<api::admissionregistration::v1::MutatingWebhookConfiguration>(object)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            round_trip::<CustomResourceDefinition>(object)
        }
        _ => Ok(object.clone()),
    }
}

/// Fields present in `input` that did not survive decoding.
fn dropped_fields(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(input), Value::Object(output)) => {
            for (key, value) in input {
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match output.get(key) {
                    Some(child) => dropped_fields(value, child, &child_path, out),
                    None if !value.is_null() => out.push(child_path),
                    None => {}
                }
            }
        }
        (Value::Array(input), Value::Array(output)) if input.len() == output.len() => {
            for (index, (a, b)) in input.iter().zip(output).enumerate() {
                dropped_fields(a, b, &format!("{path}[{index}]"), out);
            }
        }
        _ => {}
    }
}

fn admit_builtin(
    resource: &Resource,
    mut object: Value,
    validation: FieldValidation,
) -> Result<Admitted, ApiError> {
    if resource.kind == "Secret" {
        fold_string_data(&mut object);
    }
    let normalized = normalize(resource, &object).map_err(|message| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {message}",
            kind = resource.kind
        ))
    })?;
    let mut unknown = Vec::new();
    dropped_fields(&object, &normalized, "", &mut unknown);
    let version = resource
        .versions
        .first()
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let warnings = unknown_fields_error(resource, &version, &unknown, validation)?;
    let mut object = normalized;
    let mut causes = Vec::new();
    match resource.kind.as_str() {
        "Pod" => {
            defaults::pod(&mut object, true);
            pods::validate(&object, &mut causes);
        }
        "Secret" => defaults::secret(&mut object),
        "PersistentVolumeClaim" => {
            defaults::pvc(&mut object);
            if object
                .pointer("/spec/accessModes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                causes.push(Cause::invalid(
                    "spec.accessModes",
                    "Required value: at least 1 access mode is required",
                ));
            }
            if object.pointer("/spec/resources/requests/storage").is_none() {
                causes.push(Cause::invalid("spec.resources[storage]", "Required value"));
            }
        }
        "Deployment" if resource.group == "apps" => {
            workloads::deployment(&mut object);
            workloads::validate(&resource.kind, &object, &mut causes);
        }
        "ReplicaSet" if resource.group == "apps" => {
            workloads::replica_set(&mut object);
            workloads::validate(&resource.kind, &object, &mut causes);
        }
        _ => {}
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&resource.kind, &name_of(&object), causes));
    }
    Ok(Admitted { object, warnings })
}

/// `stringData` is write-only: Kubernetes merges it into `data`.
fn fold_string_data(secret: &mut Value) {
    use base64::Engine;
    let Some(map) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(data) = data.as_object_mut() {
        for (key, value) in strings {
            if let Some(text) = value.as_str() {
                data.insert(
                    key,
                    Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pruning_removes_undeclared_fields_and_keeps_preserved_ones() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "string"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let mut object = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"a": "1", "b": "2", "free": {"z": 1}}});
        let mut pruned = Vec::new();
        prune(&schema, &mut object, "", &mut pruned);
        assert_eq!(pruned, vec!["spec.b".to_owned()]);
        assert_eq!(object["spec"], json!({"a": "1", "free": {"z": 1}}));
    }

    #[test]
    fn decoding_finds_unknown_fields_of_builtin_kinds() {
        let input = json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "bogus": 1});
        let output = round_trip::<k8s_openapi::api::core::v1::ConfigMap>(&input).expect("decodes");
        let mut unknown = Vec::new();
        dropped_fields(&input, &output, "", &mut unknown);
        assert_eq!(unknown, vec!["bogus".to_owned()]);
    }
}
