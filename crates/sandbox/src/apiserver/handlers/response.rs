//! Answers in the media type the client prefers (JSON, or Kubernetes
//! protobuf for built-in kinds), with the request's warnings as `Warning`
//! headers.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::apiserver::error::ApiError;
use crate::apiserver::protobuf;

/// The encoding of a response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Protobuf,
}

/// The first media type of `Accept` the server can answer in, in the
/// client's order; protobuf only where `protobuf` says the kind has a
/// protobuf form (built-in kinds, not custom resources). A protobuf entry
/// asking for a transformation (`as=Table`) is passed over: tables are
/// JSON only.
pub fn negotiate(accept: &str, protobuf: bool) -> Result<Format, ApiError> {
    if accept.trim().is_empty() {
        return Ok(Format::Json);
    }
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or("");
        let transformed = parts.any(|p| p.starts_with("as="));
        match media_type {
            protobuf::MEDIA_TYPE if protobuf && !transformed => return Ok(Format::Protobuf),
            "application/json" | "application/*" | "*/*" => return Ok(Format::Json),
            _ => {}
        }
    }
    Err(ApiError::NotAcceptable {
        message: format!(
            "only the following media types are accepted: application/json{}; not acceptable: {accept}",
            if protobuf {
                ", application/vnd.kubernetes.protobuf"
            } else {
                ""
            }
        ),
    })
}

/// An object, list or `Status` in the negotiated format; JSON when the
/// body has no protobuf form.
pub fn body_response(
    code: StatusCode,
    body: &Value,
    warnings: &[String],
    format: Format,
) -> Response {
    if format == Format::Protobuf
        && let Some(bytes) = protobuf::encode(body)
    {
        let mut response = (code, bytes).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(protobuf::MEDIA_TYPE),
        );
        add_warnings(response.headers_mut(), warnings);
        return response;
    }
    json_response(code, body, warnings)
}

/// A refusal as a `Status` in the negotiated format.
pub fn error_response(error: ApiError, format: Format) -> Response {
    if format == Format::Json {
        return error.into_response();
    }
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    body_response(code, &error.status(), &[], format)
}

pub fn json_response(code: StatusCode, body: &Value, warnings: &[String]) -> Response {
    let mut response = (code, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    add_warnings(headers, warnings);
    response
}

fn add_warnings(headers: &mut HeaderMap, warnings: &[String]) {
    for warning in warnings {
        let escaped = warning.replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            headers.append(header::WARNING, value);
        }
    }
}

pub fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_servable_media_type_wins() {
        let kubectl = "application/vnd.kubernetes.protobuf,application/json";
        let cases = [
            (kubectl, true, Some(Format::Protobuf)),
            (kubectl, false, Some(Format::Json)),
            (
                "application/json, application/vnd.kubernetes.protobuf",
                true,
                Some(Format::Json),
            ),
            ("application/vnd.kubernetes.protobuf", false, None),
            (
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
                true,
                Some(Format::Json),
            ),
            ("", true, Some(Format::Json)),
            ("*/*", true, Some(Format::Json)),
            ("text/html", true, None),
        ];
        for (accept, protobuf, expected) in cases {
            assert_eq!(
                negotiate(accept, protobuf).ok(),
                expected,
                "{accept} {protobuf}"
            );
        }
    }

    #[test]
    fn a_protobuf_error_is_a_status_message() {
        let response = error_response(ApiError::not_found("secrets", "db"), Format::Protobuf);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            header_str(response.headers(), header::CONTENT_TYPE),
            protobuf::MEDIA_TYPE
        );
    }
}
