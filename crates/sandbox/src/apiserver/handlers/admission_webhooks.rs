//! Writes the admission webhooks review: the write is first run as a dry
//! run, so the webhooks see the object as it would be stored (defaults
//! applied, schema and rules passed, metadata set), then reviewed
//! ([`crate::apiserver::webhooks`]); only an admitted write runs for real.
//! A write the schema refuses is refused before any webhook is called, as
//! kube-apiserver calls validating webhooks last. Deletes are not
//! reviewed: one a webhook asks to review is refused, saying so.

use std::collections::HashMap;

use axum::body::to_bytes;
use axum::response::Response;
use serde_json::Value;

use super::request::ResourceRequest;
use super::{patch, write};
use crate::apiserver::error::ApiError;
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;
use crate::apiserver::webhooks::{self, Write};

/// Largest object read back from the dry run.
const MAX_OBJECT: usize = 16 * 1024 * 1024;

/// `Err` when the write must not happen (a webhook refused it, one could
/// not be called, or the dry run itself failed); `Ok` when it may run.
pub async fn review(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    verb: &str,
    status: bool,
) -> Result<(), ApiError> {
    if matches!(verb, "delete" | "deletecollection") {
        return refuse_delete_reviews(api, resource, path);
    }
    if !matches!(verb, "create" | "update" | "patch") {
        return Ok(());
    }
    let subresource = path.subresource.as_deref().filter(|_| status);
    let old = match &path.name {
        Some(name) => api
            .store
            .get(&ObjectKey::new(
                &crate::apiserver::resources::key(&resource.group, &resource.plural),
                path.namespace.as_deref().unwrap_or_default(),
                name,
            ))?
            .map(|o| (*o).clone()),
        None => None,
    };
    let operation = if verb == "create" || old.is_none() {
        "CREATE"
    } else {
        "UPDATE"
    };
    if !webhooks::covered(api, resource, &path.version, subresource, operation) {
        return Ok(());
    }
    let object = match dry_run(api, resource, path, request, verb, status).await {
        // kube-apiserver reviews a create before storage finds the name
        // taken: the webhooks see the object as sent, then the create
        // fails as it would have.
        Err(ApiError::AlreadyExists { .. }) if verb == "create" => {
            let mut object = request.object_body(resource, &path.version)?;
            if let (Some(namespace), Some(meta)) = (
                &path.namespace,
                object.get_mut("metadata").and_then(Value::as_object_mut),
            ) {
                meta.insert("namespace".to_owned(), Value::from(namespace.as_str()));
            }
            object
        }
        other => other?,
    };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    webhooks::review(
        api,
        &Write {
            resource,
            version: &path.version,
            subresource,
            namespace: path.namespace.as_deref(),
            name: &name,
            operation,
            object: &object,
            old: old.as_ref(),
            dry_run: request.dry_run()?,
            user: &request.user,
        },
    )
    .await
}

/// Webhooks that ask to review deletes are not called here: a delete one
/// of them covers is refused, saying so, rather than let through
/// unreviewed.
fn refuse_delete_reviews(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
) -> Result<(), ApiError> {
    let subresource = path.subresource.as_deref();
    if webhooks::covered(api, resource, &path.version, subresource, "DELETE") {
        return Err(ApiError::Internal {
            message: format!(
                "a webhook asks to review deletes of {}, which the sandbox's API server does not implement",
                resource.qualified_plural()
            ),
        });
    }
    Ok(())
}

/// The object the write would store.
async fn dry_run(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    verb: &str,
    status: bool,
) -> Result<Value, ApiError> {
    let mut query: HashMap<String, String> = request.query.clone();
    query.insert("dryRun".to_owned(), "All".to_owned());
    let trial = ResourceRequest {
        method: request.method.clone(),
        headers: request.headers.clone(),
        query,
        body: request.body.clone(),
        accept: "application/json".to_owned(),
        raw_query: request.raw_query.clone(),
        upgrade: None,
        user: request.user.clone(),
    };
    let response: Response = match verb {
        "create" => write::create(api, resource, path, &trial)?,
        "update" => write::update(api, resource, path, &trial, status)?,
        _ => patch::patch_request(api, resource, path, &trial, status)?,
    };
    let body = to_bytes(response.into_body(), MAX_OBJECT)
        .await
        .map_err(|e| ApiError::internal(format!("cannot read the dry run's object: {e}")))?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::internal(format!("the dry run's object is not JSON: {e}")))
}
