//! Server-side apply (PATCH with `application/apply-patch+yaml`): the
//! configuration is merged by [`crate::apiserver::apply`] under its field
//! manager, then written as an update, or as a create when nothing exists.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::apiserver::apply;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::handlers::request::{
    ResourceRequest, as_version, check_type, from_version, respond_written,
};
use crate::apiserver::objects::{self, Manage};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;

pub fn apply_request(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    status: bool,
    key: &ObjectKey,
) -> Result<Response, ApiError> {
    let manager = field_manager(request)?;
    let force = request.flag("force");
    let config = configuration(resource, path, request, key)?;
    let options = request.write_options(Manage::AlreadyRecorded)?;
    let api_version = resource.api_version(&path.version);
    let types = objects::list_types(resource, &path.version);
    let write = apply::Write {
        manager,
        subresource: if status { "status" } else { "" },
        api_version: &api_version,
        scope: objects::scope_of(resource, &path.version, status),
        time: &objects::now(),
        types: types.as_ref(),
    };
    let kind = resource.qualified_plural();
    let written = api.store.mutate(|tx| match tx.get(key) {
        Some(current) => {
            // A resourceVersion in the configuration is a precondition, as
            // on Kubernetes: a writer that read an older version is refused.
            if let Some(wanted) = objects::str_at(&config, "/metadata/resourceVersion")
                && !wanted.is_empty()
                && objects::str_at(&current, "/metadata/resourceVersion") != Some(wanted)
            {
                return Err(ApiError::stale(&kind, &key.name));
            }
            let current = from_version(path, as_version(resource, path, &current));
            let merged = apply::apply(&current, &config, &write, force, &kind, &key.name)?;
            objects::update(
                api,
                tx,
                resource,
                &path.version,
                key,
                merged,
                status,
                false,
                &options,
            )
        }
        None if status => Err(ApiError::not_found(&kind, &key.name)),
        None => {
            let skeleton = skeleton(resource, &api_version, key);
            let merged = apply::apply(&skeleton, &config, &write, force, &kind, &key.name)?;
            objects::create(
                api,
                tx,
                resource,
                &path.version,
                path.namespace.as_deref(),
                merged,
                &options,
            )
        }
    })?;
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(respond_written(resource, path, request, &written, code))
}

/// The apply configuration of the request, checked against the URL.
fn configuration(
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    key: &ObjectKey,
) -> Result<Value, ApiError> {
    let config: Value = serde_yaml_ng::from_slice(&request.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object",
        ));
    }
    if objects::str_at(&config, "/apiVersion").is_none()
        || objects::str_at(&config, "/kind").is_none()
    {
        return Err(ApiError::bad_request(
            "invalid object type: apiVersion and kind must be set in an apply configuration",
        ));
    }
    let config = from_version(path, config);
    check_type(resource, &path.version, &config)?;
    if let Some(name) = objects::str_at(&config, "/metadata/name")
        && name != key.name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            key.name
        )));
    }
    Ok(config)
}

/// Apply needs a named field manager: ownership is recorded under it.
fn field_manager(request: &ResourceRequest) -> Result<&str, ApiError> {
    request.param("fieldManager").ok_or_else(|| {
        ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "",
            vec![Cause::invalid(
                "fieldManager",
                "Required value: is required for apply patch",
            )],
        )
    })
}

/// What an apply that creates the object merges its configuration into.
fn skeleton(resource: &Resource, api_version: &str, key: &ObjectKey) -> Value {
    let mut skeleton = json!({
        "apiVersion": api_version,
        "kind": resource.kind,
        "metadata": {"name": key.name},
    });
    if resource.namespaced {
        skeleton["metadata"]["namespace"] = json!(key.namespace);
    }
    skeleton
}
