//! Paginated lists: the `continue` token names the listing's version and
//! the last key returned, so the next page resumes after it.

use base64::Engine;
use serde_json::{Value, json};

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::ResourceRequest;
use crate::apiserver::state::Api;

/// Pagination cursor: the listing's version and the last key returned.
pub fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "ns": namespace, "name": name}).to_string())
}

pub fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
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

/// The page a list request asks for.
pub struct Page {
    pub limit: Option<usize>,
    /// The listing's version and the key after which this page starts.
    pub cursor: Option<(u64, String, String)>,
}

/// Reads `limit` and `continue`, refusing versions the store no longer
/// holds.
pub fn page(api: &Api, request: &ResourceRequest) -> Result<Page, ApiError> {
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
    Ok(Page { limit, cursor })
}
