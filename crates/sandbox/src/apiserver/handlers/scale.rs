//! The scale subresource: of custom resources whose CRD declares one, as
//! apiextensions-apiserver serves it, and of Deployments and ReplicaSets.
//! An `autoscaling/v1` Scale read from the object's paths, and writes
//! (PUT, or a JSON or merge patch of the Scale, which `kubectl scale`
//! sends) that set the spec replicas path and go through the object's
//! normal update, so its schema and validation rules apply.

use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::handlers::request::{ResourceRequest, key_of};
use crate::apiserver::handlers::response::{header_str, json_response};
use crate::apiserver::objects::{self, Manage};
use crate::apiserver::patch::{self, PatchType};
use crate::apiserver::resources::{Resource, ScalePaths};
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::selectors::LabelSelector;
use crate::apiserver::state::Api;

pub fn scale_request(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    paths: &ScalePaths,
    verb: &str,
) -> Result<Response, ApiError> {
    let key = key_of(resource, path);
    let not_found = || ApiError::not_found(&resource.qualified_plural(), &key.name);
    if verb == "get" {
        let object = api.store.get(&key)?.ok_or_else(not_found)?;
        return Ok(json_response(
            StatusCode::OK,
            &scale_of(&object, paths),
            &[],
        ));
    }
    if !matches!(verb, "update" | "patch") {
        return Err(ApiError::MethodNotAllowed {
            message: format!("{verb} is not supported on the scale subresource"),
        });
    }
    let manager = request.manager();
    let options = request.write_options(Manage::Update(&manager))?;
    let written = api.store.mutate(|tx| {
        let current = tx.get(&key).ok_or_else(not_found)?;
        let scale = match verb {
            "patch" => patched_scale(&scale_of(&current, paths), request)?,
            _ => request.body_as("autoscaling/v1", "Scale", false)?,
        };
        let replicas = replicas_of(&scale, &key.name)?;
        let mut object = (*current).clone();
        set_at(&mut object, &paths.spec_replicas, json!(replicas));
        match objects::str_at(&scale, "/metadata/resourceVersion") {
            Some(rv) if !rv.is_empty() => object["metadata"]["resourceVersion"] = json!(rv),
            _ => {}
        }
        objects::update(
            api,
            tx,
            resource,
            &path.version,
            &key,
            object,
            false,
            false,
            &options,
        )
    })?;
    Ok(json_response(
        StatusCode::OK,
        &scale_of(&written.object, paths),
        &written.warnings,
    ))
}

/// The Scale of an object: its identity, and the replicas and selector
/// found at the CRD's paths (0 where a count is missing).
pub fn scale_of(object: &Value, paths: &ScalePaths) -> Value {
    let meta = object.get("metadata").cloned().unwrap_or_default();
    let mut identity = Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = meta.get(field) {
            identity.insert(field.to_owned(), value.clone());
        }
    }
    let count = |path: &str| value_at(object, path).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": count(&paths.status_replicas)});
    if paths.spec_selector {
        status["selector"] = json!(selector_string(object.pointer("/spec/selector")));
    } else if let Some(selector) = paths
        .label_selector
        .as_deref()
        .and_then(|path| value_at(object, path))
        .and_then(Value::as_str)
    {
        status["selector"] = json!(selector);
    }
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": identity,
        "spec": {"replicas": count(&paths.spec_replicas)},
        "status": status,
    })
}

/// A label selector in the string form a Scale's `status.selector` has.
fn selector_string(selector: Option<&Value>) -> String {
    selector
        .and_then(LabelSelector::from_object)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

fn patched_scale(current: &Value, request: &ResourceRequest) -> Result<Value, ApiError> {
    let content_type = header_str(&request.headers, header::CONTENT_TYPE);
    let patch_type =
        PatchType::from_content_type(content_type).map_err(|e| ApiError::UnsupportedMediaType {
            message: e.to_string(),
        })?;
    match patch_type {
        PatchType::Json => patch::json(current, &request.body),
        // A Scale has no lists: a strategic merge is a merge.
        PatchType::Merge | PatchType::Strategic => patch::merge(current, &request.body),
        PatchType::Apply => {
            return Err(ApiError::UnsupportedMediaType {
                message: "apply patches are not supported on the scale subresource".into(),
            });
        }
    }
    .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// `spec.replicas` of a Scale, checked as Kubernetes validates a Scale.
fn replicas_of(scale: &Value, name: &str) -> Result<i64, ApiError> {
    let invalid = |message: String| {
        ApiError::invalid(
            "Scale.autoscaling",
            name,
            vec![Cause::invalid("spec.replicas", message)],
        )
    };
    let value = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    let replicas = value
        .as_i64()
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| invalid(format!("Invalid value: {value}: must be a 32-bit integer")))?;
    if replicas < 0 {
        return Err(invalid(format!(
            "Invalid value: {replicas}: must be greater than or equal to 0"
        )));
    }
    Ok(replicas)
}

/// The segments of a simple JSON path (`.spec.replicas`).
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
}

fn value_at<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    segments(path).try_fold(object, |current, segment| current.get(segment))
}

fn set_at(object: &mut Value, path: &str, value: Value) {
    let mut current = object;
    let parts: Vec<&str> = segments(path).collect();
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    for part in parents {
        if !current.get(*part).is_some_and(Value::is_object) {
            current[*part] = json!({});
        }
        current = &mut current[*part];
    }
    current[*last] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.instances".into(),
            status_replicas: ".status.readyInstances".into(),
            label_selector: Some(".status.selector".into()),
            spec_selector: false,
        }
    }

    #[test]
    fn a_scale_shows_the_declared_paths() {
        let cluster = json!({
            "metadata": {"name": "small", "namespace": "db", "resourceVersion": "9", "labels": {"a": "b"}},
            "spec": {"instances": 3},
            "status": {"readyInstances": 2, "selector": "tusk.dev/cluster=small"},
        });
        assert_eq!(
            scale_of(&cluster, &paths()),
            json!({
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": "small", "namespace": "db", "resourceVersion": "9"},
                "spec": {"replicas": 3},
                "status": {"replicas": 2, "selector": "tusk.dev/cluster=small"},
            })
        );
        let fresh = json!({"metadata": {"name": "new"}, "spec": {"instances": 1}});
        assert_eq!(scale_of(&fresh, &paths())["status"], json!({"replicas": 0}));
    }

    #[test]
    fn a_workloads_scale_shows_its_selector_as_text() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"tier": "web", "app": "shop"}}},
            "status": {"replicas": 2}
        });
        let scale = scale_of(&deployment, &ScalePaths::workload());
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 2);
        assert_eq!(scale["status"]["selector"], "app=shop,tier=web");
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn replicas_are_set_at_the_spec_path_creating_parents() {
        let mut object = json!({"metadata": {}});
        set_at(&mut object, ".spec.instances", json!(4));
        assert_eq!(object["spec"], json!({"instances": 4}));
    }

    #[test]
    fn negative_or_oversized_replicas_are_invalid() {
        let error = replicas_of(&json!({"spec": {"replicas": -1}}), "small").expect_err("refused");
        assert!(
            error
                .to_string()
                .contains("spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
            "{error}"
        );
        assert!(replicas_of(&json!({"spec": {"replicas": 5_000_000_000i64}}), "small").is_err());
        assert_eq!(
            replicas_of(&json!({"spec": {"replicas": 2}}), "small").ok(),
            Some(2)
        );
    }
}
