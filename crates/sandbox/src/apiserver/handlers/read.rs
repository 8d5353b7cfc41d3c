//! Reading: get one object, list many (selectors, pagination, tables).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::pagination::{Page, encode_continue, page};
use crate::apiserver::handlers::request::{
    ResourceRequest, as_version, key_of, respond_object, selectors,
};
use crate::apiserver::handlers::response::{body_response, json_response};
use crate::apiserver::objects;
use crate::apiserver::partial;
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;
use crate::apiserver::table;

pub fn get(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let key = key_of(resource, path);
    let object = api
        .store
        .get(&key)?
        .ok_or_else(|| ApiError::not_found(&resource.qualified_plural(), &key.name))?;
    Ok(respond_object(
        resource,
        path,
        request,
        &object,
        StatusCode::OK,
        &[],
    ))
}

pub fn list(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(resource, request)?;
    let Page { limit, cursor } = page(api, request)?;
    let (current_rv, items) = api.store.list(&resource.key, path.namespace.as_deref())?;
    let list_rv = cursor.as_ref().map_or(current_rv, |(rv, _, _)| *rv);
    let mut selected = Vec::new();
    let mut more = false;
    for item in &items {
        let ns = objects::str_at(item, "/metadata/namespace").unwrap_or("");
        let name = objects::str_at(item, "/metadata/name").unwrap_or("");
        if let Some((_, after_ns, after_name)) = &cursor
            && (ns, name) <= (after_ns.as_str(), after_name.as_str())
        {
            continue;
        }
        if !(labels.matches(item) && fields.matches(&resource.kind, item)) {
            continue;
        }
        if limit.is_some_and(|l| selected.len() >= l) {
            more = true;
            break;
        }
        selected.push(as_version(resource, path, item));
    }
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if more && let Some(last) = selected.last() {
        metadata["continue"] = json!(encode_continue(
            list_rv,
            objects::str_at(last, "/metadata/namespace").unwrap_or(""),
            objects::str_at(last, "/metadata/name").unwrap_or(""),
        ));
    }
    if table::wanted(&request.accept) {
        let include = request.param("includeObject").unwrap_or("Metadata");
        return Ok(json_response(
            StatusCode::OK,
            &table::render(resource, &path.version, &selected, metadata, include),
            &[],
        ));
    }
    if let Some(wanted) = partial::wanted(&request.accept)? {
        let listed = partial::list(&selected, metadata, &resource.kind, wanted)?;
        return Ok(json_response(StatusCode::OK, &listed, &[]));
    }
    Ok(body_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(&path.version),
            "metadata": metadata,
            "items": selected,
        }),
        &[],
        request.format(resource, &path.version),
    ))
}
