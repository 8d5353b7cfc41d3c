//! Writes by POST, PUT and DELETE: create, update (with a namespace's
//! `finalize` subresource), delete and deletecollection.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::{
    ResourceRequest, as_version, check_type, from_version, key_of, respond_object, respond_written,
    selectors,
};
use crate::apiserver::handlers::response::body_response;
use crate::apiserver::objects::{self, DeleteOptions, Manage};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

pub fn create(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    if path.name.is_some() {
        return Err(ApiError::MethodNotAllowed {
            message: "POST is not allowed on a named object".into(),
        });
    }
    let object = from_version(path, request.object_body(resource, &path.version)?);
    check_type(resource, &path.version, &object)?;
    if let (Some(url_ns), Some(body_ns)) = (
        &path.namespace,
        objects::str_at(&object, "/metadata/namespace"),
    ) && !body_ns.is_empty()
        && body_ns != url_ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let manager = request.manager();
    let options = request.write_options(Manage::Update(&manager))?;
    let written = api.store.mutate(|tx| {
        objects::create(
            api,
            tx,
            resource,
            &path.version,
            path.namespace.as_deref(),
            object,
            &options,
        )
    })?;
    Ok(respond_written(
        resource,
        path,
        request,
        &written,
        StatusCode::CREATED,
    ))
}

pub fn update(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    status: bool,
) -> Result<Response, ApiError> {
    let object = from_version(path, request.object_body(resource, &path.version)?);
    check_type(resource, &path.version, &object)?;
    let key = key_of(resource, path);
    let manager = request.manager();
    let options = request.write_options(Manage::Update(&manager))?;
    let finalize = path.subresource.as_deref() == Some("finalize");
    let written = api.store.mutate(|tx| {
        if finalize {
            return finalize_namespace(api, tx, resource, &key, &object);
        }
        objects::update(
            api,
            tx,
            resource,
            &path.version,
            &key,
            object,
            status,
            true,
            &options,
        )
    })?;
    Ok(respond_written(
        resource,
        path,
        request,
        &written,
        StatusCode::OK,
    ))
}

/// PUT /api/v1/namespaces/{name}/finalize: replaces `spec.finalizers`.
fn finalize_namespace(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    object: &Value,
) -> Result<objects::Written, ApiError> {
    let wanted = objects::string_list(object.pointer("/spec/finalizers"));
    if !wanted.iter().any(|f| f == objects::NAMESPACE_FINALIZER) {
        objects::remove_finalizer(api, tx, resource, key, objects::NAMESPACE_FINALIZER)?;
    }
    let object = tx.get(key).unwrap_or_else(|| Arc::new(object.clone()));
    Ok(objects::Written {
        object,
        warnings: Vec::new(),
        created: false,
    })
}

fn delete_options(request: &ResourceRequest) -> Result<DeleteOptions, ApiError> {
    let body = if request.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        request.body_as("v1", "DeleteOptions", true)?
    };
    DeleteOptions::from_body(
        &body,
        request.param("propagationPolicy"),
        request.param("gracePeriodSeconds"),
        request.dry_run()?,
    )
}

pub fn delete(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let options = delete_options(request)?;
    let key = key_of(resource, path);
    let object = api
        .store
        .mutate(|tx| objects::delete(api, tx, resource, &key, &options))?;
    let pending =
        object.pointer("/metadata/deletionTimestamp").is_some() && api.store.get(&key)?.is_some();
    let code = if pending {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(respond_object(resource, path, request, &object, code, &[]))
}

pub fn delete_collection(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let options = delete_options(request)?;
    let (labels, fields) = selectors(resource, request)?;
    let deleted = api.store.mutate(|tx| {
        let mut deleted = Vec::new();
        for item in tx.list(&resource.key, path.namespace.as_deref()) {
            if !(labels.matches(&item) && fields.matches(&resource.kind, &item)) {
                continue;
            }
            let key = ObjectKey::new(
                &resource.key,
                objects::str_at(&item, "/metadata/namespace").unwrap_or(""),
                objects::str_at(&item, "/metadata/name").unwrap_or(""),
            );
            let object = objects::delete(api, tx, resource, &key, &options)?;
            deleted.push(as_version(resource, path, &object));
        }
        Ok::<_, ApiError>(deleted)
    })?;
    let rv = api.store.current_rv()?;
    Ok(body_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(&path.version),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": deleted,
        }),
        &[],
        request.format(resource, &path.version),
    ))
}
