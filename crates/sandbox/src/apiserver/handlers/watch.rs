//! A watch request: its parameters, answered by a stream of events from
//! [`crate::apiserver::watch`].

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::{ResourceRequest, is_events_v1, selectors};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::state::Api;
use crate::apiserver::table;
use crate::apiserver::watch::{self, WatchRequest};

pub fn watch_request(
    api: &Arc<Api>,
    resource: Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(&resource, request)?;
    let resource_version = match request.param("resourceVersion") {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: \"{text}\": must be a number"
            ))
        })?),
    };
    let timeout = request
        .param("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    let table = table::wanted(&request.accept).then(|| {
        request
            .param("includeObject")
            .unwrap_or("Metadata")
            .to_owned()
    });
    let stream = watch::stream(
        api.clone(),
        WatchRequest {
            events_v1: is_events_v1(path),
            resource,
            version: path.version.clone(),
            namespace: path.namespace.clone(),
            labels,
            fields,
            resource_version,
            bookmarks: request.flag("allowWatchBookmarks"),
            send_initial_events: request.flag("sendInitialEvents"),
            timeout,
            table,
        },
    )?;
    let mut response = Body::from_stream(stream).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
