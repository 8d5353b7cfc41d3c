//! Errors as the Kubernetes API reports them: a `Status` object with a
//! reason, an HTTP code and, for invalid objects, one cause per field.
//!
//! Clients (kube-rs, kubectl, client-go) branch on `code` and `reason`, so
//! every refusal the sandbox makes goes through [`ApiError`] and is shaped
//! exactly like the real server's.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One invalid field of an object (`Status.details.causes[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub field: String,
    pub message: String,
    pub reason: &'static str,
}

impl Cause {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            reason: "FieldValueInvalid",
        }
    }
}

/// What the API server refuses, with the reason Kubernetes would give.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { message: String },
    #[error("Unauthorized")]
    Unauthorized,
    #[error("{message}")]
    Forbidden { message: String },
    /// Forbidden by authorization or the RBAC escalation check, with the
    /// resource in `details` as kube-apiserver reports it.
    #[error("{message}")]
    ForbiddenResource {
        group: String,
        resource: String,
        name: String,
        message: String,
    },
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: String, name: String },
    #[error("the server could not find the requested resource")]
    NoResource,
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists { kind: String, name: String },
    #[error("{message}")]
    Conflict {
        kind: String,
        name: String,
        message: String,
    },
    #[error("{message}")]
    Gone { message: String },
    #[error("{kind} \"{name}\" is invalid: {}", render_causes(causes))]
    Invalid {
        kind: String,
        name: String,
        causes: Vec<Cause>,
    },
    #[error("{message}")]
    MethodNotAllowed { message: String },
    #[error("{message}")]
    UnsupportedMediaType { message: String },
    #[error("{message}")]
    NotAcceptable { message: String },
    #[error("{message}")]
    Injected {
        code: u16,
        message: String,
        retry_after: Option<u64>,
    },
    /// What the API server could not reach (a pod behind `pods/proxy`).
    #[error("{message}")]
    ServiceUnavailable { message: String },
    #[error("Internal error occurred: {message}")]
    Internal { message: String },
    /// A `Status` an admission webhook answered with, passed on as
    /// kube-apiserver passes it (its code, reason and details kept).
    #[error("{message}")]
    Webhook { status: Value, message: String },
}

fn render_causes(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|c| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    if parts.len() == 1 {
        parts.join("")
    } else {
        format!("[{}]", parts.join(", "))
    }
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
        }
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::Internal {
            message: message.to_string(),
        }
    }

    pub fn invalid(kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        Self::Invalid {
            kind: kind.to_owned(),
            name: name.to_owned(),
            causes,
        }
    }

    pub fn not_found(kind: &str, name: &str) -> Self {
        Self::NotFound {
            kind: kind.to_owned(),
            name: name.to_owned(),
        }
    }

    pub fn conflict(kind: &str, name: &str, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind: kind.to_owned(),
            name: name.to_owned(),
            message: message.into(),
        }
    }

    /// The optimistic-concurrency conflict every client retries on.
    pub fn stale(kind: &str, name: &str) -> Self {
        Self::conflict(
            kind,
            name,
            format!(
                "Operation cannot be fulfilled on {kind} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
    }

    pub fn code(&self) -> u16 {
        match self {
            Self::BadRequest { .. } => 400,
            Self::Unauthorized => 401,
            Self::Forbidden { .. } | Self::ForbiddenResource { .. } => 403,
            Self::NotFound { .. } | Self::NoResource => 404,
            Self::MethodNotAllowed { .. } => 405,
            Self::NotAcceptable { .. } => 406,
            Self::AlreadyExists { .. } | Self::Conflict { .. } => 409,
            Self::Gone { .. } => 410,
            Self::UnsupportedMediaType { .. } => 415,
            Self::Invalid { .. } => 422,
            Self::Injected { code, .. } => *code,
            Self::Internal { .. } => 500,
            Self::ServiceUnavailable { .. } => 503,
            Self::Webhook { status, .. } => status
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(400),
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "BadRequest",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden { .. } | Self::ForbiddenResource { .. } => "Forbidden",
            Self::NotFound { .. } | Self::NoResource => "NotFound",
            Self::MethodNotAllowed { .. } => "MethodNotAllowed",
            Self::NotAcceptable { .. } => "NotAcceptable",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } => "Conflict",
            Self::Gone { .. } => "Expired",
            Self::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            Self::Invalid { .. } => "Invalid",
            Self::Injected { code: 429, .. } => "TooManyRequests",
            Self::Injected { code: 503, .. } | Self::ServiceUnavailable { .. } => {
                "ServiceUnavailable"
            }
            Self::Injected { .. } | Self::Internal { .. } => "InternalError",
            Self::Webhook { .. } => "",
        }
    }

    /// The `Status` object sent as the response body (and inside watch
    /// `ERROR` events).
    pub fn status(&self) -> Value {
        if let Self::Webhook { status, message } = self {
            let mut status = status.clone();
            status["kind"] = json!("Status");
            status["apiVersion"] = json!("v1");
            status["metadata"] = json!({});
            status["message"] = json!(message);
            status["code"] = json!(self.code());
            return status;
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            Self::NotFound { kind, name } | Self::AlreadyExists { kind, name } => {
                Some(json!({"name": name, "kind": kind}))
            }
            Self::Conflict { kind, name, .. } => Some(json!({"name": name, "kind": kind})),
            Self::ForbiddenResource {
                group,
                resource,
                name,
                ..
            } => {
                let fields = [("name", name), ("group", group), ("kind", resource)];
                let present = fields.into_iter().filter(|(_, v)| !v.is_empty());
                Some(Value::Object(
                    present.map(|(k, v)| (k.to_owned(), json!(v))).collect(),
                ))
            }
            Self::Invalid { kind, name, causes } => {
                let (kind, group) = kind.split_once('.').unwrap_or((kind.as_str(), ""));
                Some(json!({
                    "name": name,
                    "group": group,
                    "kind": kind,
                    "causes": causes.iter().map(|c| json!({
                        "reason": c.reason,
                        "message": c.message,
                        "field": c.field,
                    })).collect::<Vec<_>>(),
                }))
            }
            Self::Injected {
                retry_after: Some(seconds),
                ..
            } => Some(json!({"retryAfterSeconds": seconds})),
            _ => None,
        };
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.status().to_string();
        let mut response = (code, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Self::Injected {
            retry_after: Some(seconds),
            ..
        } = &self
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            headers.insert(header::RETRY_AFTER, value);
        }
        response
    }
}

impl From<crate::apiserver::storage::StorageError> for ApiError {
    fn from(error: crate::apiserver::storage::StorageError) -> Self {
        ApiError::internal(error)
    }
}

impl From<crate::apiserver::selectors::SelectorError> for ApiError {
    fn from(error: crate::apiserver::selectors::SelectorError) -> Self {
        ApiError::bad_request(error.to_string())
    }
}
