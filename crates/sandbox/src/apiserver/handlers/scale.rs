//! The `scale` subresource of Deployments and ReplicaSets: an
//! `autoscaling/v1` Scale whose `spec.replicas` is the object's, read with
//! GET and written with PUT or a JSON or merge PATCH (what `kubectl scale`
//! sends).

use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::{ResourceRequest, key_of};
use crate::apiserver::handlers::response::{header_str, json_response};
use crate::apiserver::objects::{self, Manage};
use crate::apiserver::patch::{self, PatchType};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;

/// A label selector in the string form `status.selector` carries.
fn selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut parts: Vec<String> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for expression in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = expression
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(match expression.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("DoesNotExist") => format!("!{key}"),
            _ => key.to_owned(),
        });
    }
    parts.sort();
    parts.join(",")
}

/// The Scale a Deployment or ReplicaSet shows.
pub fn scale_of(object: &Value) -> Value {
    let meta = |key: &str| object.pointer(&format!("/metadata/{key}")).cloned();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta("name"),
            "namespace": meta("namespace"),
            "uid": meta("uid"),
            "resourceVersion": meta("resourceVersion"),
            "creationTimestamp": meta("creationTimestamp"),
        },
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector_string(object.pointer("/spec/selector")),
        },
    })
}

fn not_found(resource: &Resource, path: &ResourcePath) -> ApiError {
    ApiError::not_found(
        &resource.qualified_plural(),
        path.name.as_deref().unwrap_or(""),
    )
}

/// GET, PUT or PATCH on `{plural}/{name}/scale`.
pub fn scale_request(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    verb: &str,
) -> Result<Response, ApiError> {
    let key = key_of(resource, path);
    if verb == "get" {
        let object = api
            .store
            .get(&key)?
            .ok_or_else(|| not_found(resource, path))?;
        return Ok(json_response(StatusCode::OK, &scale_of(&object), &[]));
    }
    if !matches!(verb, "update" | "patch") {
        return Err(ApiError::MethodNotAllowed {
            message: "the server does not allow this method on the requested resource".into(),
        });
    }
    let manager = request.manager();
    let options = request.write_options(Manage::Update(&manager))?;
    let written = api.store.mutate(|tx| {
        let current = tx.get(&key).ok_or_else(|| not_found(resource, path))?;
        let scale = wanted_scale(verb, request, &scale_of(&current))?;
        let wanted_rv = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        let current_rv = objects::str_at(&current, "/metadata/resourceVersion");
        if wanted_rv.is_some_and(|rv| !rv.is_empty()) && wanted_rv != current_rv {
            return Err(ApiError::stale(&resource.qualified_plural(), &key.name));
        }
        let Some(replicas) = scale.pointer("/spec/replicas").and_then(Value::as_i64) else {
            return Err(ApiError::bad_request(
                "spec.replicas of the Scale must be an integer",
            ));
        };
        let mut object = (*current).clone();
        object["spec"]["replicas"] = json!(replicas);
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
        &scale_of(&written.object),
        &written.warnings,
    ))
}

/// The Scale a PUT sends, or the current one with a PATCH applied.
fn wanted_scale(verb: &str, request: &ResourceRequest, current: &Value) -> Result<Value, ApiError> {
    if verb == "update" {
        return request.json_body();
    }
    let content_type = header_str(&request.headers, header::CONTENT_TYPE);
    let patched = match PatchType::from_content_type(content_type) {
        Ok(PatchType::Json) => patch::json(current, &request.body),
        Ok(PatchType::Merge | PatchType::Strategic) => patch::merge(current, &request.body),
        Ok(PatchType::Apply) | Err(_) => {
            return Err(ApiError::UnsupportedMediaType {
                message: format!(
                    "the scale subresource takes a JSON or merge patch, not {content_type}"
                ),
            });
        }
    };
    patched.map_err(|e| ApiError::bad_request(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_shows_replicas_and_the_selector_as_text() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"tier": "web", "app": "shop"}}},
            "status": {"replicas": 2}
        });
        let scale = scale_of(&deployment);
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"]["replicas"], 2);
        assert_eq!(scale["status"]["selector"], "app=shop,tier=web");
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
    }
}
