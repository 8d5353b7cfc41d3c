//! Authentication: every request but `/version` and `/healthz` carries the
//! sandbox's bearer token.

use axum::http::{HeaderMap, header};

use crate::apiserver::handlers::response::header_str;
use crate::apiserver::state::Api;

pub fn authorized(api: &Api, headers: &HeaderMap) -> bool {
    let value = header_str(headers, header::AUTHORIZATION);
    value
        .strip_prefix("Bearer ")
        .is_some_and(|token| token.trim() == api.token)
}
