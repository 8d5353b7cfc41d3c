//! PATCH with a JSON, merge or strategic merge body; apply patches go to
//! [`super::apply`].

use axum::http::{StatusCode, header};
use axum::response::Response;

use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::handlers::apply::apply_request;
use crate::apiserver::handlers::request::{
    ResourceRequest, as_version, from_version, key_of, respond_written,
};
use crate::apiserver::handlers::response::header_str;
use crate::apiserver::objects::{self, Manage};
use crate::apiserver::patch::{self, PatchType};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;

pub fn patch_request(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    status: bool,
) -> Result<Response, ApiError> {
    let content_type = header_str(&request.headers, header::CONTENT_TYPE);
    let patch_type =
        PatchType::from_content_type(content_type).map_err(|e| ApiError::UnsupportedMediaType {
            message: e.to_string(),
        })?;
    let key = key_of(resource, path);
    let manager = request.manager();
    if patch_type == PatchType::Apply {
        return apply_request(api, resource, path, request, status, &key);
    }
    let options = request.write_options(Manage::Update(&manager))?;
    let written = api.store.mutate(|tx| {
        let current = tx
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&resource.qualified_plural(), &key.name))?;
        let current = as_version(resource, path, &current);
        let patched = match patch_type {
            PatchType::Json => patch::json(&current, &request.body),
            PatchType::Merge => patch::merge(&current, &request.body),
            PatchType::Strategic => patch::strategic(&current, &request.body, resource.custom),
            PatchType::Apply => Err(patch::PatchError::UnknownType),
        }
        .map_err(|e| match e {
            patch::PatchError::StrategicOnCustom => ApiError::UnsupportedMediaType {
                message: e.to_string(),
            },
            patch::PatchError::Apply(message) => ApiError::invalid(
                &resource.qualified_kind(),
                &key.name,
                vec![Cause::invalid("", message)],
            ),
            other => ApiError::bad_request(other.to_string()),
        })?;
        let patched = from_version(path, patched);
        objects::update(
            api,
            tx,
            resource,
            &path.version,
            &key,
            patched,
            status,
            false,
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
