//! HTTP handling: authentication, fault injection, routing, and the verbs
//! (get, list, watch, create, update, patch, delete, deletecollection) on
//! top of [`crate::apiserver::objects`] and [`crate::apiserver::storage`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::apply;
use crate::apiserver::discovery;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::events;
use crate::apiserver::objects::{self, DeleteOptions, Manage, WriteOptions};
use crate::apiserver::openapi;
use crate::apiserver::patch::{self, PatchType};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::{self, ResourcePath, Route};
use crate::apiserver::selectors::{FieldSelector, LabelSelector, SelectorError};
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, StorageError};
use crate::apiserver::table;
use crate::apiserver::watch::{self, WatchRequest};

const MAX_BODY: usize = 16 * 1024 * 1024;

impl From<StorageError> for ApiError {
    fn from(error: StorageError) -> Self {
        ApiError::internal(error)
    }
}

impl From<SelectorError> for ApiError {
    fn from(error: SelectorError) -> Self {
        ApiError::bad_request(error.to_string())
    }
}

pub async fn handle(State(api): State<Arc<Api>>, request: Request) -> Response {
    match dispatch(&api, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

fn json_response(code: StatusCode, body: &Value, warnings: &[String]) -> Response {
    let mut response = (code, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for warning in warnings {
        let escaped = warning.replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            headers.append(header::WARNING, value);
        }
    }
    response
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn authorized(api: &Api, headers: &HeaderMap) -> bool {
    let value = header_str(headers, header::AUTHORIZATION);
    value
        .strip_prefix("Bearer ")
        .is_some_and(|token| token.trim() == api.token)
}

/// Whether the response can be JSON for this `Accept` header.
fn accepts_json(accept: &str) -> bool {
    accept.is_empty() || accept.contains("json") || accept.contains("*/*")
}

async fn dispatch(api: &Arc<Api>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let route = routing::parse(parts.uri.path());
    if !matches!(route, Route::Version | Route::Health) && !authorized(api, &parts.headers) {
        return Err(ApiError::Unauthorized);
    }
    let accept = header_str(&parts.headers, header::ACCEPT).to_owned();
    if route == Route::OpenApiV2 && accept.contains("protobuf") {
        let mut response = (StatusCode::OK, openapi::v2_protobuf()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(openapi::V2_PROTOBUF),
        );
        return Ok(response);
    }
    if !accepts_json(&accept) {
        return Err(ApiError::NotAcceptable {
            message: format!("only JSON is served; not acceptable: {accept}"),
        });
    }
    let query: HashMap<String, String> = Query::try_from_uri(&parts.uri)
        .map(|Query(q)| q)
        .unwrap_or_default();
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
        Route::Resource(path) => {
            let body = to_bytes(body, MAX_BODY)
                .await
                .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
            let request = ResourceRequest {
                method: parts.method,
                headers: parts.headers,
                query,
                body: body.to_vec(),
                accept,
            };
            resource_request(api, path, request).await
        }
    }
}

struct ResourceRequest {
    method: Method,
    headers: HeaderMap,
    query: HashMap<String, String>,
    body: Vec<u8>,
    accept: String,
}

impl ResourceRequest {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.param("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            ))),
        }
    }

    /// The field manager: the query parameter, or the client's name from
    /// its User-Agent, as Kubernetes derives it.
    fn manager(&self) -> String {
        if let Some(manager) = self.param("fieldManager") {
            return manager.to_owned();
        }
        let agent = header_str(&self.headers, header::USER_AGENT);
        let name = agent.split('/').next().unwrap_or("").trim();
        if name.is_empty() {
            "unknown".to_owned()
        } else {
            name.to_owned()
        }
    }

    fn write_options<'m>(&self, manage: Manage<'m>) -> Result<WriteOptions<'m>, ApiError> {
        Ok(WriteOptions {
            manage,
            dry_run: self.dry_run()?,
            validation: FieldValidation::parse(self.param("fieldValidation"))?,
        })
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        let content_type = header_str(&self.headers, header::CONTENT_TYPE);
        if content_type.contains("protobuf") || content_type.contains("cbor") {
            return Err(ApiError::UnsupportedMediaType {
                message: format!(
                    "the sandbox reads JSON and YAML request bodies only, not {content_type}; with kubectl, use apply"
                ),
            });
        }
        if content_type.contains("yaml") {
            return serde_yaml_ng::from_slice(&self.body)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
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
    let resource = api
        .registry
        .lookup(&path.group, &path.version, &path.plural)
        .ok_or(ApiError::NoResource)?;
    if path.namespace.is_some() && !resource.namespaced {
        return Err(ApiError::NoResource);
    }
    // events.k8s.io/v1 Events live in the core Event store.
    let resource = if is_events_v1(&path) {
        api.registry.by_key("/events").ok_or(ApiError::NoResource)?
    } else {
        resource
    };
    let status = match path.subresource.as_deref() {
        None => false,
        Some("status") if resource.has_status(&path.version) => true,
        Some("finalize") if resource.kind == "Namespace" => false,
        Some(other) => {
            return Err(ApiError::NotFound {
                kind: resource.qualified_plural(),
                name: format!("{}/{other}", path.name.clone().unwrap_or_default()),
            });
        }
    };
    match verb {
        "get" => get(api, &resource, &path, &request),
        "list" => list(api, &resource, &path, &request),
        "watch" => watch_request(api, resource, &path, &request),
        "create" => create(api, &resource, &path, &request),
        "update" => update(api, &resource, &path, &request, status),
        "patch" => patch_request(api, &resource, &path, &request, status),
        "delete" => delete(api, &resource, &path, &request),
        "deletecollection" => delete_collection(api, &resource, &path, &request),
        _ => Err(ApiError::MethodNotAllowed {
            message: "the server does not allow this method on the requested resource".into(),
        }),
    }
}

fn key_of(resource: &Resource, path: &ResourcePath) -> ObjectKey {
    ObjectKey::new(
        &resource.key,
        path.namespace.as_deref().unwrap_or(""),
        path.name.as_deref().unwrap_or(""),
    )
}

fn is_events_v1(path: &ResourcePath) -> bool {
    path.group == "events.k8s.io" && path.plural == "events"
}

/// An object as the requested group and version show it.
fn as_version(resource: &Resource, path: &ResourcePath, object: &Value) -> Value {
    if is_events_v1(path) {
        return events::to_events_v1(object);
    }
    let mut object = object.clone();
    object["apiVersion"] = json!(resource.api_version(&path.version));
    object
}

/// A request body in the stored form.
fn from_version(path: &ResourcePath, object: Value) -> Value {
    if is_events_v1(path) {
        events::to_core(&object)
    } else {
        object
    }
}

fn respond_object(
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    object: &Value,
    code: StatusCode,
    warnings: &[String],
) -> Response {
    let object = as_version(resource, path, object);
    if table::wanted(&request.accept) {
        let include = request.param("includeObject").unwrap_or("Metadata");
        let rendered = table::render(resource, &path.version, &[object], json!({}), include);
        return json_response(code, &rendered, warnings);
    }
    json_response(code, &object, warnings)
}

fn get(
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

fn selectors(
    resource: &Resource,
    request: &ResourceRequest,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(request.param("labelSelector").unwrap_or(""))?;
    let fields =
        FieldSelector::parse(request.param("fieldSelector").unwrap_or(""), &resource.kind)?;
    Ok((labels, fields))
}

/// Pagination cursor: the listing's version and the last key returned.
fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "ns": namespace, "name": name}).to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: the token was not produced by this server",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    Ok((
        value
            .get("rv")
            .and_then(Value::as_u64)
            .ok_or_else(invalid)?,
        value
            .get("ns")
            .and_then(Value::as_str)
            .ok_or_else(invalid)?
            .to_owned(),
        value
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(invalid)?
            .to_owned(),
    ))
}

fn list(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(resource, request)?;
    let limit: Option<usize> = match request.param("limit") {
        Some(text) => Some(
            text.parse()
                .map_err(|_| ApiError::bad_request(format!("limit: invalid value \"{text}\"")))?,
        )
        .filter(|l| *l > 0),
        None => None,
    };
    let cursor = request.param("continue").map(decode_continue).transpose()?;
    // Older states are not kept: an exact older version cannot be listed.
    if request.param("resourceVersionMatch") == Some("Exact")
        && let Some(wanted) = request.param("resourceVersion")
        && wanted != api.store.current_rv()?.to_string()
    {
        return Err(ApiError::Gone {
            message: format!(
                "too old resource version: {wanted} (the sandbox lists only its latest state)"
            ),
        });
    }
    if let Some((rv, _, _)) = &cursor
        && *rv < api.store.oldest_rv()?
    {
        return Err(ApiError::Gone {
            message: "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
        });
    }
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
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(&path.version),
            "metadata": metadata,
            "items": selected,
        }),
        &[],
    ))
}

fn watch_request(
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

fn check_type(resource: &Resource, version: &str, object: &Value) -> Result<(), ApiError> {
    let expected = resource.api_version(version);
    if let Some(api_version) = objects::str_at(object, "/apiVersion")
        && api_version != expected
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    if let Some(kind) = objects::str_at(object, "/kind")
        && kind != resource.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            resource.kind
        )));
    }
    Ok(())
}

fn create(
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
    let object = from_version(path, request.json_body()?);
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
    Ok(respond_object(
        resource,
        path,
        request,
        &written.object,
        StatusCode::CREATED,
        &written.warnings,
    ))
}

fn update(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    status: bool,
) -> Result<Response, ApiError> {
    let object = from_version(path, request.json_body()?);
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
    Ok(respond_object(
        resource,
        path,
        request,
        &written.object,
        StatusCode::OK,
        &written.warnings,
    ))
}

/// PUT /api/v1/namespaces/{name}/finalize: replaces `spec.finalizers`.
fn finalize_namespace(
    api: &Api,
    tx: &mut crate::apiserver::storage::Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    object: &Value,
) -> Result<objects::Written, ApiError> {
    let wanted: Vec<String> = object
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
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

fn patch_request(
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
    Ok(respond_object(
        resource,
        path,
        request,
        &written.object,
        StatusCode::OK,
        &written.warnings,
    ))
}

fn apply_request(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    status: bool,
    key: &ObjectKey,
) -> Result<Response, ApiError> {
    let Some(manager) = request.param("fieldManager") else {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "",
            vec![Cause::invalid(
                "fieldManager",
                "Required value: is required for apply patch",
            )],
        ));
    };
    let force = request.flag("force");
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
            let mut skeleton = json!({
                "apiVersion": api_version,
                "kind": resource.kind,
                "metadata": {"name": key.name},
            });
            if resource.namespaced {
                skeleton["metadata"]["namespace"] = json!(key.namespace);
            }
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
    Ok(respond_object(
        resource,
        path,
        request,
        &written.object,
        code,
        &written.warnings,
    ))
}

fn delete_options(request: &ResourceRequest) -> Result<DeleteOptions, ApiError> {
    let body = if request.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        request.json_body()?
    };
    DeleteOptions::from_body(
        &body,
        request.param("propagationPolicy"),
        request.param("gracePeriodSeconds"),
        request.dry_run()?,
    )
}

fn delete(
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

fn delete_collection(
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
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(&path.version),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": deleted,
        }),
        &[],
    ))
}
