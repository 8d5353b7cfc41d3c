//! CustomResourceDefinitions: checking them, reporting them Established,
//! and turning them into served resources.

mod structural;
mod validations;

use std::sync::Arc;

use serde_json::{Value, json};
use tusk_api::admission::{AdmissionSchema, cost};

use crate::apiserver::error::Cause;
use crate::apiserver::resources::{PrinterColumn, Resource, ScalePaths, Version, key};

pub const RESOURCE_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Cleanup of a CRD's objects runs behind this finalizer, as on Kubernetes.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// What Kubernetes refuses in a CRD: names, scope and versions, each
/// version's structural schema and its `x-kubernetes-validations`.
pub fn validate(crd: &Value) -> Vec<Cause> {
    validate_update(None, crd)
}

/// As [`validate`], for an update of `old` when there is one: a version
/// whose schema the update leaves as it was is not held to the
/// per-expression cost limit again, as kube-apiserver does not.
pub fn validate_update(old: Option<&Value>, crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = str_at(crd, "/spec/group").unwrap_or_default();
    let plural = str_at(crd, "/spec/names/plural").unwrap_or_default();
    let name = str_at(crd, "/metadata/name").unwrap_or_default();
    if group.is_empty() {
        causes.push(Cause::invalid("spec.group", "Required value"));
    }
    if plural.is_empty() {
        causes.push(Cause::invalid("spec.names.plural", "Required value"));
    }
    if str_at(crd, "/spec/names/kind").is_none_or(str::is_empty) {
        causes.push(Cause::invalid("spec.names.kind", "Required value"));
    }
    if name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(str_at(crd, "/spec/scope"), Some("Namespaced" | "Cluster")) {
        causes.push(Cause::invalid(
            "spec.scope",
            "Unsupported value: supported values: \"Cluster\", \"Namespaced\"",
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::invalid(
            "spec.versions",
            "Required value: must have at least one version",
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
        .count();
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    let mut costed = Vec::new();
    for (index, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{index}].schema.openAPIV3Schema");
        match version.pointer("/schema/openAPIV3Schema") {
            None => causes.push(Cause::invalid(path, "Required value: schemas are required")),
            Some(schema) => {
                let structural = structural::violations(schema, &path);
                let sound = structural.is_empty();
                causes.extend(structural);
                let rules = validations::violations(schema, &path, sound);
                if sound && rules.is_empty() {
                    costed.push((schema, path));
                }
                causes.extend(rules);
            }
        }
    }
    causes.extend(cost_violations(&versions, costed, old));
    if let Some(strategy) = str_at(crd, "/spec/conversion/strategy")
        && strategy != "None"
    {
        causes.push(Cause {
            field: "spec.conversion.strategy".into(),
            message: format!(
                "Unsupported value: \"{strategy}\": the sandbox serves only conversion strategy None"
            ),
            reason: "FieldValueNotSupported",
        });
    }
    causes
}

/// Rules over kube-apiserver's CEL cost budget, in the sound schemas
/// (`costed`). kube-apiserver keeps one schema for all versions when they
/// are identical and names its fields `spec.validation.openAPIV3Schema...`,
/// estimating it once; otherwise each version's on its own.
fn cost_violations(
    versions: &[Value],
    costed: Vec<(&Value, String)>,
    old: Option<&Value>,
) -> Vec<Cause> {
    let schemas: Vec<Option<&Value>> = versions
        .iter()
        .map(|v| v.pointer("/schema/openAPIV3Schema"))
        .collect();
    let shared = schemas.windows(2).all(|pair| pair[0] == pair[1]);
    let mut checks: Vec<(&Value, String)> = costed;
    if shared {
        checks.truncate(1);
        if let Some((_, path)) = checks.first_mut() {
            *path = "spec.validation.openAPIV3Schema".into();
        }
    }
    // A version is known by the schema path's index; the shared schema by
    // the first version's name, as kube-apiserver knows it.
    let unchanged = |schema: &Value, path: &str| {
        let index: usize = path
            .strip_prefix("spec.versions[")
            .and_then(|rest| rest.split(']').next())
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
        let name = versions.get(index).and_then(|v| v.get("name"));
        old.and_then(|old| old.pointer("/spec/versions"))
            .and_then(Value::as_array)
            .and_then(|old| old.iter().find(|v| v.get("name") == name))
            .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
            == Some(schema)
    };
    checks
        .into_iter()
        .flat_map(|(schema, path)| {
            if unchanged(schema, &path) {
                cost::total_violations(schema, &path)
            } else {
                cost::violations(schema, &path)
            }
        })
        .map(|violation| Cause {
            field: violation.field,
            message: format!("Forbidden: {}", violation.message),
            reason: "FieldValueForbidden",
        })
        .collect()
}

/// The status Kubernetes reports once a CRD is served.
pub fn established_status(crd: &Value, now: &str) -> Value {
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let mut stored_versions: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for version in stored {
        if !stored_versions.contains(&version) {
            stored_versions.push(version);
        }
    }
    json!({
        "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or(json!({})),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now}
        ],
        "storedVersions": stored_versions,
    })
}

/// The storage key of the resource a CRD defines (`group/plural`): what
/// removing it needs, without compiling its schemas as [`resource`] does.
pub fn served_key(crd: &Value) -> Option<String> {
    Some(key(
        str_at(crd, "/spec/group")?,
        str_at(crd, "/spec/names/plural")?,
    ))
}

/// The served resource a CRD defines, its schemas compiled.
pub fn resource(crd: &Value) -> Option<Resource> {
    let group = str_at(crd, "/spec/group")?.to_owned();
    let names = crd.pointer("/spec/names")?;
    let plural = names.get("plural")?.as_str()?.to_owned();
    let kind = names.get("kind")?.as_str()?.to_owned();
    let strings = |field: &str| -> Vec<String> {
        names
            .get(field)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .filter_map(|v| {
            Some(Version {
                name: v.get("name")?.as_str()?.to_owned(),
                served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                schema: v
                    .pointer("/schema/openAPIV3Schema")
                    .map(|schema| Arc::new(AdmissionSchema::new(schema.clone()))),
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .map(|cols| cols.iter().filter_map(printer_column).collect())
                    .unwrap_or_default(),
                status_subresource: v.pointer("/subresources/status").is_some(),
                scale: v.pointer("/subresources/scale").and_then(scale_paths),
            })
        })
        .collect();
    Some(Resource {
        key: key(&group, &plural),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| kind.to_lowercase()),
        short_names: strings("shortNames"),
        categories: strings("categories"),
        namespaced: str_at(crd, "/spec/scope") == Some("Namespaced"),
        group,
        plural,
        kind,
        versions,
        custom: true,
    })
}

fn scale_paths(scale: &Value) -> Option<ScalePaths> {
    let text = |name: &str| scale.get(name).and_then(Value::as_str).map(str::to_owned);
    Some(ScalePaths {
        spec_replicas: text("specReplicasPath")?,
        status_replicas: text("statusReplicasPath")?,
        label_selector: text("labelSelectorPath"),
        spec_selector: false,
    })
}

fn printer_column(column: &Value) -> Option<PrinterColumn> {
    Some(PrinterColumn {
        name: column.get("name")?.as_str()?.to_owned(),
        type_: column
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string")
            .to_owned(),
        format: column
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        description: column
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
        json_path: column.get("jsonPath")?.as_str()?.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: Vec<Value>) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": versions}
        })
    }

    /// A version whose one rule matches every item of an unbounded list of
    /// unbounded strings: far over the budget.
    fn version(name: &str, storage: bool, rule: &str) -> Value {
        json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {
                "tags": {"type": "array", "items": {"type": "string"},
                         "x-kubernetes-validations": [{"rule": rule}]}
            }}}
        }}})
    }

    const EXPENSIVE: &str = "self.all(t, t.matches('^[a-z]+$'))";

    #[test]
    fn crds_with_a_rule_over_the_cost_budget_are_refused_as_kube_apiserver_does() {
        let causes = validate(&crd(vec![version("v1", true, EXPENSIVE)]));
        let rule = "spec.validation.openAPIV3Schema.properties[spec].properties[tags]\
                    .x-kubernetes-validations[0].rule";
        let refused: Vec<&Cause> = causes.iter().filter(|c| c.field == rule).collect();
        assert_eq!(refused.len(), 2, "{causes:#?}");
        assert_eq!(refused[0].reason, "FieldValueForbidden");
        assert!(
            refused[0].message.starts_with(
                "Forbidden: estimated rule cost exceeds budget by factor of more than 100x"
            ),
            "{}",
            refused[0].message
        );
        assert!(
            causes
                .iter()
                .any(|c| c.field == "spec.validation.openAPIV3Schema"
                    && c.message
                        .contains("estimated rule cost total for entire OpenAPIv3 schema")),
            "{causes:#?}"
        );
    }

    #[test]
    fn crds_with_different_schemas_per_version_name_the_version() {
        let causes = validate(&crd(vec![
            version("v1", true, "size(self) < 3"),
            version("v2", false, EXPENSIVE),
        ]));
        assert!(
            causes.iter().any(|c| c
                .field
                .starts_with("spec.versions[1].schema.openAPIV3Schema.properties[spec]")),
            "{causes:#?}"
        );
        assert!(
            !causes
                .iter()
                .any(|c| c.field.starts_with("spec.versions[0]")),
            "{causes:#?}"
        );
    }

    #[test]
    fn crds_updated_without_changing_a_schema_are_not_held_to_each_rules_limit() {
        let stored = crd(vec![version("v1", true, EXPENSIVE)]);
        let mut updated = stored.clone();
        updated["spec"]["names"]["shortNames"] = json!(["wd"]);
        let causes = validate_update(Some(&stored), &updated);
        assert!(
            causes
                .iter()
                .all(|c| !c.message.contains("estimated rule cost exceeds")),
            "{causes:#?}"
        );
        // The schema's total is still held to its limit.
        assert!(
            causes
                .iter()
                .any(|c| c.field == "spec.validation.openAPIV3Schema"),
            "{causes:#?}"
        );
        let changed = crd(vec![version(
            "v1",
            true,
            "self.all(t, t.matches('^[a-y]+$'))",
        )]);
        let causes = validate_update(Some(&stored), &changed);
        assert!(
            causes
                .iter()
                .any(|c| c.message.contains("estimated rule cost exceeds")),
            "{causes:#?}"
        );
    }

    #[test]
    fn crds_with_cheap_rules_are_accepted() {
        let causes = validate(&crd(vec![version("v1", true, "size(self) < 3")]));
        assert!(causes.is_empty(), "{causes:#?}");
    }
}
