//! What a resource request asks for (query parameters, body, field
//! manager, dry run) and how its object is shown in the requested version.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::auth::UserInfo;
use crate::apiserver::error::ApiError;
use crate::apiserver::events;
use crate::apiserver::handlers::response::{
    Format, body_response, header_str, json_response, negotiate,
};
use crate::apiserver::objects::{self, Manage, WriteOptions, Written};
use crate::apiserver::partial;
use crate::apiserver::protobuf;
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::ResourcePath;
use crate::apiserver::selectors::{FieldSelector, LabelSelector};
use crate::apiserver::storage::ObjectKey;
use crate::apiserver::table;

pub struct ResourceRequest {
    pub method: Method,
    pub headers: HeaderMap,
    pub query: HashMap<String, String>,
    pub body: Vec<u8>,
    pub accept: String,
    /// The query as sent (repeated parameters such as exec's `command`
    /// kept), for requests proxied to a kubelet.
    pub raw_query: String,
    /// The client's connection, when the request asks for an upgrade.
    pub upgrade: Option<hyper::upgrade::OnUpgrade>,
    /// Who sent it.
    pub user: Arc<UserInfo>,
}

impl ResourceRequest {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }

    pub fn dry_run(&self) -> Result<bool, ApiError> {
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
    pub fn manager(&self) -> String {
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

    pub fn write_options<'m>(&self, manage: Manage<'m>) -> Result<WriteOptions<'m>, ApiError> {
        Ok(WriteOptions {
            manage,
            user: Some(self.user.clone()),
            dry_run: self.dry_run()?,
            validation: FieldValidation::parse(self.param("fieldValidation"))?,
        })
    }

    /// The response format for objects of `resource`, from `Accept`.
    pub fn format(&self, resource: &Resource, version: &str) -> Format {
        negotiate(&self.accept, has_protobuf_form(resource, version)).unwrap_or(Format::Json)
    }

    /// The object in the body of a create or update of `resource`: JSON,
    /// YAML, or protobuf for built-in kinds.
    pub fn object_body(&self, resource: &Resource, version: &str) -> Result<Value, ApiError> {
        let protobuf = has_protobuf_form(resource, version);
        self.body_as(&resource.api_version(version), &resource.kind, protobuf)
    }

    /// The body as JSON, decoding protobuf as `api_version` and `kind`
    /// when `protobuf` allows it.
    pub fn body_as(
        &self,
        api_version: &str,
        kind: &str,
        protobuf: bool,
    ) -> Result<Value, ApiError> {
        let content_type = header_str(&self.headers, header::CONTENT_TYPE);
        if content_type.starts_with(protobuf::MEDIA_TYPE) && protobuf {
            return protobuf::decode(&self.body, api_version, kind)
                .map_err(|e| ApiError::bad_request(e.to_string()));
        }
        if content_type.contains("protobuf") || content_type.contains("cbor") {
            return Err(ApiError::UnsupportedMediaType {
                message: format!(
                    "the body of the request was in an unknown format ({content_type}) - {kind} of {api_version} accepts application/json and application/yaml"
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

/// Whether objects of `resource` are read and written in protobuf too:
/// built-in kinds are, custom resources are JSON only.
pub fn has_protobuf_form(resource: &Resource, version: &str) -> bool {
    !resource.custom && protobuf::serves(&resource.api_version(version), &resource.kind)
}

pub fn key_of(resource: &Resource, path: &ResourcePath) -> ObjectKey {
    ObjectKey::new(
        &resource.key,
        path.namespace.as_deref().unwrap_or(""),
        path.name.as_deref().unwrap_or(""),
    )
}

pub fn is_events_v1(path: &ResourcePath) -> bool {
    path.group == "events.k8s.io" && path.plural == "events"
}

/// An object as the requested group and version show it.
pub fn as_version(resource: &Resource, path: &ResourcePath, object: &Value) -> Value {
    if is_events_v1(path) {
        return events::to_events_v1(object);
    }
    let mut object = object.clone();
    object["apiVersion"] = json!(resource.api_version(&path.version));
    object
}

/// A request body in the stored form.
pub fn from_version(path: &ResourcePath, object: Value) -> Value {
    if is_events_v1(path) {
        events::to_core(&object)
    } else {
        object
    }
}

/// What a write stored, in the form the client asked for, with the
/// write's warnings.
pub fn respond_written(
    resource: &Resource,
    path: &ResourcePath,
    request: &ResourceRequest,
    written: &Written,
    code: StatusCode,
) -> Response {
    respond_object(
        resource,
        path,
        request,
        &written.object,
        code,
        &written.warnings,
    )
}

pub fn respond_object(
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
    let wanted = match partial::wanted(&request.accept) {
        Ok(wanted) => wanted,
        Err(error) => return error.into_response(),
    };
    if let Some(wanted) = wanted {
        return match partial::single(&object, wanted) {
            Ok(partial) => json_response(code, &partial, warnings),
            Err(error) => error.into_response(),
        };
    }
    body_response(
        code,
        &object,
        warnings,
        request.format(resource, &path.version),
    )
}

pub fn selectors(
    resource: &Resource,
    request: &ResourceRequest,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(request.param("labelSelector").unwrap_or(""))?;
    let fields =
        FieldSelector::parse(request.param("fieldSelector").unwrap_or(""), &resource.kind)?;
    Ok((labels, fields))
}

pub fn check_type(resource: &Resource, version: &str, object: &Value) -> Result<(), ApiError> {
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
