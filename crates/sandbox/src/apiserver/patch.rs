//! PATCH bodies other than server-side apply: JSON merge patch (RFC 7386),
//! JSON patch (RFC 6902, with `test`), and strategic merge patch for the
//! built-in kinds.
//!
//! RFC 7386 and RFC 6902 come from the `json-patch` crate. Strategic merge
//! is Kubernetes-specific: lists whose Go type declares a merge key
//! (containers by name, ports by port, conditions by type ...) merge
//! element by element instead of being replaced. Custom resources have no
//! merge keys, so, as on Kubernetes, a strategic merge patch to one is
//! refused with 415.

use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )]
    UnknownType,
    #[error("the body of the request is not valid: {0}")]
    Body(String),
    #[error("the patch could not be applied: {0}")]
    Apply(String),
    #[error(
        "strategic merge patch is not supported for custom resources; use a JSON merge patch or server-side apply"
    )]
    StrategicOnCustom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Result<Self, PatchError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            _ => Err(PatchError::UnknownType),
        }
    }
}

/// RFC 7386.
pub fn merge(current: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(body).map_err(|e| PatchError::Body(e.to_string()))?;
    let mut out = current.clone();
    json_patch::merge(&mut out, &patch);
    Ok(out)
}

/// RFC 6902. A `test` for `null` at a path that does not exist succeeds, as
/// in the Go implementation Kubernetes uses (kube's finalizer helper relies
/// on it to add the first finalizer).
pub fn json(current: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let patch: json_patch::Patch =
        serde_json::from_slice(body).map_err(|e| PatchError::Body(e.to_string()))?;
    let mut out = current.clone();
    for operation in &patch.0 {
        if let json_patch::PatchOperation::Test(test) = operation
            && test.value.is_null()
            && out.pointer(test.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(operation))
            .map_err(|e| PatchError::Apply(e.to_string()))?;
    }
    Ok(out)
}

/// The merge key of a list field in the built-in kinds, by field name and
/// the name of the field holding it (ports differ between containers and
/// Services).
pub fn merge_key(parent: &str, field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "hostAliases"
        | "readinessGates"
        | "containerStatuses"
        | "initContainerStatuses"
        | "subsets" => match field {
            "hostAliases" => Some("ip"),
            "readinessGates" => Some("conditionType"),
            "subsets" => None,
            _ => Some("name"),
        },
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "ports" => Some(if parent == "containers" || parent == "initContainers" {
            "containerPort"
        } else {
            "port"
        }),
        "podIPs" | "hostIPs" => Some("ip"),
        // Validating and mutating webhook configurations' webhooks.
        "webhooks" => Some("name"),
        _ => None,
    }
}

/// Lists of scalars that merge as sets (`patchStrategy: merge`).
fn merges_as_set(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge patch for built-in kinds.
pub fn strategic(current: &Value, body: &[u8], custom: bool) -> Result<Value, PatchError> {
    if custom {
        return Err(PatchError::StrategicOnCustom);
    }
    let patch: Value = serde_json::from_slice(body).map_err(|e| PatchError::Body(e.to_string()))?;
    Ok(strategic_value(current, &patch, ""))
}

fn strategic_value(current: &Value, patch: &Value, parent: &str) -> Value {
    match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => {
            Value::Object(strategic_map(current, patch, parent))
        }
        (_, Value::Object(patch)) => Value::Object(strategic_map(&Map::new(), patch, parent)),
        (_, other) => other.clone(),
    }
}

fn strategic_map(
    current: &Map<String, Value>,
    patch: &Map<String, Value>,
    parent: &str,
) -> Map<String, Value> {
    let mut out = current.clone();
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        replaced.remove("$patch");
        return replaced;
    }
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        if key.starts_with("$setElementOrder/") || key.starts_with("$deleteFromPrimitiveList/") {
            continue;
        }
        if value.is_null() {
            out.remove(key);
            continue;
        }
        let merged = match (out.get(key), value) {
            (Some(Value::Array(existing)), Value::Array(items)) => {
                if let Some(merge_key) = merge_key(parent, key) {
                    Value::Array(merge_list(existing, items, merge_key, key))
                } else if merges_as_set(key) {
                    let mut union = existing.clone();
                    for item in items {
                        if !union.contains(item) {
                            union.push(item.clone());
                        }
                    }
                    Value::Array(union)
                } else {
                    value.clone()
                }
            }
            (Some(existing), Value::Object(_)) => strategic_value(existing, value, key),
            (None, Value::Object(_)) => strategic_value(&Value::Null, value, key),
            (None, Value::Array(items)) => Value::Array(
                items
                    .iter()
                    .filter(|i| i.get("$patch").is_none())
                    .cloned()
                    .collect(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), merged);
    }
    if let Some(Value::Array(order)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = order.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    out
}

fn merge_list(existing: &[Value], items: &[Value], merge_key: &str, field: &str) -> Vec<Value> {
    let mut out: Vec<Value> = existing.to_vec();
    for item in items {
        let Some(id) = item.get(merge_key) else {
            out.push(item.clone());
            continue;
        };
        let position = out.iter().position(|e| e.get(merge_key) == Some(id));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(index), true) => {
                out.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => out[index] = strategic_value(&out[index], item, field),
            (None, false) => out.push(strategic_value(&Value::Null, item, field)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_by_name_and_env_by_name() {
        let current = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}]},
            {"name": "b", "image": "y"}
        ]}});
        let patch = json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "B", "value": "2"}]}
        ]}});
        let out = strategic(&current, patch.to_string().as_bytes(), false).expect("patches");
        assert_eq!(out["spec"]["containers"].as_array().map(Vec::len), Some(2));
        assert_eq!(out["spec"]["containers"][0]["image"], "x");
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
    }

    #[test]
    fn strategic_merge_deletes_with_patch_directive_and_null() {
        let current = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"ports": [{"port": 80}, {"port": 443}]}});
        let patch = json!({"metadata": {"labels": {"a": null}},
            "spec": {"ports": [{"port": 80, "$patch": "delete"}]}});
        let out = strategic(&current, patch.to_string().as_bytes(), false).expect("patches");
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["spec"]["ports"], json!([{"port": 443}]));
    }

    #[test]
    fn json_patch_test_for_null_on_missing_path_passes_and_wrong_value_fails() {
        let current = json!({"metadata": {"name": "a"}});
        let ok = json(
            &current,
            br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#,
        )
        .expect("patches");
        assert_eq!(ok["metadata"]["finalizers"], json!(["f"]));
        assert!(
            json(
                &ok,
                br#"[{"op":"test","path":"/metadata/finalizers","value":["g"]}]"#
            )
            .is_err()
        );
    }
}
