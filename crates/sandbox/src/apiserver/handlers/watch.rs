//! A watch request: its parameters, answered by a stream of events from
//! [`crate::apiserver::watch`].

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use std::convert::Infallible;

use axum::body::Bytes;
use futures::{Stream, StreamExt};

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::{ResourceRequest, is_events_v1, selectors};
use crate::apiserver::handlers::response::Format;
use crate::apiserver::partial::{self, Partial};
use crate::apiserver::protobuf;
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
    // A list's form cannot be given to one event's object: kube-apiserver
    // then sends the object unchanged (see `crate::apiserver::partial`).
    let partial = match partial::wanted(&request.accept)? {
        Some((Partial::Object, api_version)) => Some(api_version),
        Some((Partial::List, _)) | None => None,
    };
    let protobuf_wanted = table.is_none()
        && partial.is_none()
        && request.format(&resource, &path.version) == Format::Protobuf;
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
            partial,
        },
    )?;
    if protobuf_wanted {
        return Ok(protobuf_stream(stream));
    }
    let mut response = Body::from_stream(stream).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// The JSON event lines as protobuf frames (each line is one event).
fn protobuf_stream(
    events: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
) -> Response {
    let frames = events.map(|line| {
        line.map(|line| {
            serde_json::from_slice::<serde_json::Value>(&line)
                .ok()
                .and_then(|event| protobuf::frame(&event))
                .map_or_else(Bytes::new, Bytes::from)
        })
    });
    let mut response = Body::from_stream(frames).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(protobuf::WATCH_MEDIA_TYPE),
    );
    response
}
