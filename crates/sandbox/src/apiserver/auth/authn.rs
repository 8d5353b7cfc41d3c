//! Authentication: who a request comes from.
//!
//! The bearer token is the sandbox's own (its kubeconfig: the admin in
//! `system:masters`) or a ServiceAccount token this server signed, which
//! authenticates only while its ServiceAccount (and bound Pod or Secret)
//! exists with the uid recorded in the token: a deleted and recreated
//! ServiceAccount invalidates its old tokens, as on Kubernetes. Requests
//! without credentials are anonymous for the health and version
//! endpoints only (kube-apiserver's anonymous authentication restricted
//! to those paths); elsewhere, and for any invalid token, 401.

use axum::http::{HeaderMap, header};
use serde_json::Value;

use crate::apiserver::auth::tokens::{Claims, ObjectRef};
use crate::apiserver::auth::user::UserInfo;
use crate::apiserver::error::ApiError;
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;

/// The user a request authenticates as. `anonymous_allowed` is true for
/// the paths that serve requests without credentials.
pub fn authenticate(
    api: &Api,
    headers: &HeaderMap,
    anonymous_allowed: bool,
) -> Result<UserInfo, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(token) = value.strip_prefix("Bearer ").map(str::trim) else {
        return if value.is_empty() && anonymous_allowed {
            Ok(UserInfo::anonymous())
        } else {
            Err(ApiError::Unauthorized)
        };
    };
    if token == api.token {
        return Ok(UserInfo::admin());
    }
    if token.split('.').count() == 3 {
        return service_account(api, token).map_err(|reason| {
            tracing::debug!(%reason, "service account token refused");
            ApiError::Unauthorized
        });
    }
    Err(ApiError::Unauthorized)
}

/// The ServiceAccount a signed token names, if it (and its bound object)
/// still exists with the same uid.
fn service_account(api: &Api, token: &str) -> Result<UserInfo, String> {
    let claims = api.tokens.verify(token).map_err(|e| e.to_string())?;
    let k8s = &claims.kubernetes;
    let account = &k8s.serviceaccount;
    check_exists(
        api,
        "/serviceaccounts",
        "serviceaccount",
        &k8s.namespace,
        account,
    )?;
    if let Some(pod) = &k8s.pod {
        check_exists(api, "/pods", "pod", &k8s.namespace, pod)?;
    }
    if let Some(secret) = &k8s.secret {
        check_exists(api, "/secrets", "secret", &k8s.namespace, secret)?;
    }
    let mut user = UserInfo::service_account(&k8s.namespace, &account.name, &account.uid);
    extra(&claims, &mut user);
    Ok(user)
}

fn check_exists(
    api: &Api,
    key: &str,
    what: &str,
    namespace: &str,
    reference: &ObjectRef,
) -> Result<(), String> {
    let stored = api
        .store
        .get(&ObjectKey::new(key, namespace, &reference.name))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{what} {namespace}/{} has been deleted", reference.name))?;
    let uid = stored
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    if uid != reference.uid {
        return Err(format!(
            "{what} uid ({uid}) does not match claim ({})",
            reference.uid
        ));
    }
    Ok(())
}

/// The extra attributes kube-apiserver attaches to a ServiceAccount user.
fn extra(claims: &Claims, user: &mut UserInfo) {
    let mut put = |key: &str, value: &str| {
        user.extra.insert(
            format!("authentication.kubernetes.io/{key}"),
            vec![value.to_owned()],
        );
    };
    put("credential-id", &format!("JTI={}", claims.jti));
    if let Some(pod) = &claims.kubernetes.pod {
        put("pod-name", &pod.name);
        put("pod-uid", &pod.uid);
    }
}
