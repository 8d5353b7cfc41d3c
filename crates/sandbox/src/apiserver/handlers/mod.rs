//! HTTP handling: authentication, fault injection, routing, and the verbs
//! (get, list, watch, create, update, patch, delete, deletecollection) on
//! top of [`crate::apiserver::objects`] and [`crate::apiserver::storage`].
//!
//! Authentication and authorization are [`crate::apiserver::auth`]'s;
//! here, one module per concern: `request` (what a resource request asks
//! for and how its answer is shaped), `response` (the media type
//! negotiated from `Accept`: JSON, or protobuf for built-in kinds), `read`
//! (get and list, with `pagination`), `watch`, `write` (create, update,
//! delete), `patch`, `apply` (server-side apply), `scale` (the scale
//! subresource), `pod_streams` (`pods/log` and `pods/exec`, proxied to
//! the kubelet) and `pod_proxy` (`pods/proxy`, HTTP to a pod's port).

mod admission_webhooks;
mod apply;
mod pagination;
mod patch;
mod pod_proxy;
mod pod_streams;
mod read;
mod request;
mod response;
mod scale;
mod watch;
mod write;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::to_bytes;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::apiserver::auth;
use crate::apiserver::discovery;
use crate::apiserver::error::ApiError;
use crate::apiserver::openapi;
use crate::apiserver::partitions::PodKey;
use crate::apiserver::routing::{self, ResourcePath, Route};
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;
use request::{ResourceRequest, is_events_v1};
use response::{header_str, json_response};

const MAX_BODY: usize = 16 * 1024 * 1024;

pub async fn handle(State(api): State<Arc<Api>>, request: Request) -> Response {
    match dispatch(&api, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

/// Whether the response can be JSON for this `Accept` header.
fn accepts_json(accept: &str) -> bool {
    accept.is_empty() || accept.contains("json") || accept.contains("*/*")
}

/// Authenticates the request, holds it while its pod is cut off from the
/// API server (see [`crate::apiserver::partitions`]), and serves it.
async fn dispatch(api: &Arc<Api>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let route = routing::parse(parts.uri.path());
    let anonymous_allowed = matches!(route, Route::Version | Route::Health);
    let user = Arc::new(auth::authenticate(api, &parts.headers, anonymous_allowed)?);
    let query: HashMap<String, String> = Query::try_from_uri(&parts.uri)
        .map(|Query(q)| q)
        .unwrap_or_default();
    let watching = matches!(route, Route::Resource(_))
        && query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let Some((pod, node)) = bound_pod(api, &user, watching) else {
        return dispatch_reachable(api, Request::from_parts(parts, body), user, query).await;
    };
    let partitions = api.faults.partitions().clone();
    partitions.reachable(&pod, node.as_deref()).await;
    let response = dispatch_reachable(api, Request::from_parts(parts, body), user, query).await?;
    Ok(if watching {
        let (parts, body) = response.into_parts();
        Response::from_parts(parts, partitions.hold_while_cut(body, pod, node))
    } else {
        response
    })
}

/// The pod (and its node) a request's token is bound to, when it may be
/// cut off: now (some pod or node is) or later (a watch lasts).
fn bound_pod(
    api: &Api,
    user: &auth::user::UserInfo,
    watching: bool,
) -> Option<(PodKey, Option<String>)> {
    if !watching && !api.faults.partitions().any() {
        return None;
    }
    let pod = user.bound_pod()?;
    let stored = api
        .store
        .get(&ObjectKey::new("/pods", &pod.0, &pod.1))
        .ok()
        .flatten();
    let node = stored
        .as_ref()
        .and_then(|p| p.pointer("/spec/nodeName"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some((pod, node))
}

async fn dispatch_reachable(
    api: &Arc<Api>,
    request: Request,
    user: Arc<auth::user::UserInfo>,
    query: HashMap<String, String>,
) -> Result<Response, ApiError> {
    let (mut parts, body) = request.into_parts();
    let route = routing::parse(parts.uri.path());
    auth::authorize_request(api, &user, &parts.method, parts.uri.path(), &route, &query)?;
    let accept = header_str(&parts.headers, header::ACCEPT).to_owned();
    if route == Route::OpenApiV2 && accept.contains("protobuf") {
        let mut response = (StatusCode::OK, openapi::v2_protobuf()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(openapi::V2_PROTOBUF),
        );
        return Ok(response);
    }
    // Resources negotiate protobuf per kind in `resource_request`.
    let negotiated_later = matches!(route, Route::Resource(_)) && accept.contains("protobuf");
    // A pod's log, exec session or proxied answer is not JSON to negotiate.
    let relayed = pod_streams::is_stream_route(&route) || pod_proxy::is_proxy_route(&route);
    if !negotiated_later && !accepts_json(&accept) && !relayed {
        return Err(ApiError::NotAcceptable {
            message: format!("only JSON is served; not acceptable: {accept}"),
        });
    }
    let ok = |value: Value| Ok(json_response(StatusCode::OK, &value, &[]));
    let not_found = || Err(ApiError::NoResource);
    match route {
        Route::Version => ok(discovery::version()),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
        Route::CoreVersions => ok(discovery::core_versions(&api.address)),
        Route::CoreResources => {
            discovery::resources(&api.registry, "", "v1").map_or_else(not_found, ok)
        }
        Route::Groups => ok(discovery::groups(&api.registry)),
        Route::Group(group) => discovery::group(&api.registry, &group).map_or_else(not_found, ok),
        Route::GroupResources(group, version) => {
            discovery::resources(&api.registry, &group, &version).map_or_else(not_found, ok)
        }
        Route::OpenApiV2 => ok(openapi::v2(&api.registry)),
        Route::OpenApiV3 => ok(openapi::v3_root(&api.registry)),
        Route::OpenApiV3GroupVersion(group, version) => {
            ok(openapi::v3_group_version(&api.registry, &group, &version))
        }
        Route::Unknown => not_found(),
        Route::SandboxFault(fault) => {
            crate::apiserver::fault_control::serve(api, &parts.method, &fault, &query).await
        }
        Route::Resource(path) => {
            let body = to_bytes(body, MAX_BODY)
                .await
                .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
            let request = ResourceRequest {
                raw_query: parts.uri.query().unwrap_or_default().to_owned(),
                upgrade: parts.extensions.remove::<hyper::upgrade::OnUpgrade>(),
                method: parts.method,
                headers: parts.headers,
                query,
                body: body.to_vec(),
                accept,
                user,
            };
            resource_request(api, path, request).await
        }
    }
}

fn verb(method: &Method, path: &ResourcePath, watch: bool) -> &'static str {
    match (method.as_str(), path.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

async fn resource_request(
    api: &Arc<Api>,
    path: ResourcePath,
    request: ResourceRequest,
) -> Result<Response, ApiError> {
    let watching = request.flag("watch");
    let verb = verb(&request.method, &path, watching);
    let label = match &path.subresource {
        Some(sub) => format!("{}/{sub}", path.plural),
        None => path.plural.clone(),
    };
    let (failure, delay) = api.faults.on_request(verb, &label);
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    if let Some(failure) = failure {
        return Err(failure);
    }
    if let Some(kind) = auth::reviews::review_kind(&path.group, &path.plural) {
        return review(api, kind, &path, &request, verb);
    }
    let resource = api
        .registry
        .lookup(&path.group, &path.version, &path.plural)
        .ok_or(ApiError::NoResource)?;
    if path.namespace.is_some() && !resource.namespaced {
        return Err(ApiError::NoResource);
    }
    if pod_streams::is_pod_stream(&resource, &path) {
        return pod_streams::serve(api, &resource, &path, request).await;
    }
    if pod_proxy::is_pod_proxy(&resource, &path) {
        return pod_proxy::serve(api, &resource, &path, request).await;
    }
    // events.k8s.io/v1 Events live in the core Event store.
    let resource = if is_events_v1(&path) {
        api.registry.by_key("/events").ok_or(ApiError::NoResource)?
    } else {
        resource
    };
    if path.subresource.as_deref() == Some("scale")
        && path.name.is_some()
        && let Some(paths) = resource.scale(&path.version)
    {
        return scale::scale_request(api, &resource, &path, &request, paths, verb);
    }
    let status = match path.subresource.as_deref() {
        None => false,
        Some("status") if resource.has_status(&path.version) => true,
        Some("finalize") if resource.kind == "Namespace" => false,
        Some("token") if resource.kind == "ServiceAccount" && verb == "create" => {
            return token_request(api, &path, &request);
        }
        Some(other) => {
            return Err(ApiError::NotFound {
                kind: resource.qualified_plural(),
                name: format!("{}/{other}", path.name.clone().unwrap_or_default()),
            });
        }
    };
    let format = response::negotiate(
        &request.accept,
        request::has_protobuf_form(&resource, &path.version),
    )?;
    if let Err(error) =
        admission_webhooks::review(api, &resource, &path, &request, verb, status).await
    {
        return Ok(response::error_response(error, format));
    }
    let answer = match verb {
        "get" => read::get(api, &resource, &path, &request),
        "list" => read::list(api, &resource, &path, &request),
        "watch" => watch::watch_request(api, resource, &path, &request),
        "create" => write::create(api, &resource, &path, &request),
        "update" => write::update(api, &resource, &path, &request, status),
        "patch" => patch::patch_request(api, &resource, &path, &request, status),
        "delete" => write::delete(api, &resource, &path, &request),
        "deletecollection" => write::delete_collection(api, &resource, &path, &request),
        _ => Err(ApiError::MethodNotAllowed {
            message: "the server does not allow this method on the requested resource".into(),
        }),
    };
    Ok(answer.unwrap_or_else(|error| response::error_response(error, format)))
}

/// `POST .../serviceaccounts/{name}/token`.
fn token_request(
    api: &Api,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let body = if header_str(&request.headers, header::CONTENT_TYPE).contains("protobuf") {
        auth::protobuf::token_request_body(&request.body)?
    } else {
        request.body_as("authentication.k8s.io/v1", "TokenRequest", false)?
    };
    let namespace = path.namespace.as_deref().unwrap_or("");
    let name = path.name.as_deref().unwrap_or("");
    let created = auth::token_request::create(api, namespace, name, &body)?;
    Ok(json_response(StatusCode::CREATED, &created, &[]))
}

/// A create of SelfSubjectAccessReview and the other reviews.
fn review(
    api: &Api,
    kind: &str,
    path: &ResourcePath,
    request: &ResourceRequest,
    verb: &str,
) -> Result<Response, ApiError> {
    if verb != "create" || path.name.is_some() {
        return Err(ApiError::MethodNotAllowed {
            message: "the server does not allow this method on the requested resource".into(),
        });
    }
    let body = if header_str(&request.headers, header::CONTENT_TYPE).contains("protobuf") {
        auth::protobuf::review_body(kind, &request.body)?
    } else {
        request.body_as(&format!("{}/{}", path.group, path.version), kind, false)?
    };
    let namespace = path.namespace.as_deref();
    let answer = auth::reviews::create(&api.store, &request.user, kind, namespace, &body)?;
    Ok(json_response(StatusCode::CREATED, &answer, &[]))
}
