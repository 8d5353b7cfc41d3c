//! Admission webhooks, called as kube-apiserver calls them: after the
//! object passed its schema and rules, before it is stored, every webhook
//! of every ValidatingWebhookConfiguration (in name order) whose rules and
//! selectors match ([`matching`]) gets an AdmissionReview v1 ([`call`]).
//! A refusal is passed on as kube-apiserver passes it (`admission webhook
//! "<name>" denied the request: ...`, the webhook's code, reason and
//! causes kept); a webhook that cannot be called refuses the request under
//! `failurePolicy: Fail` (the default) and is skipped under `Ignore`.
//!
//! Not implemented, and said so rather than skipped: `matchConditions`
//! (refused as a failed call) and MutatingWebhookConfigurations (a
//! request one of them matches is refused). Warnings in a webhook's
//! response are not forwarded.

pub mod call;
pub mod matching;

use std::sync::Arc;

use serde_json::{Value, json};
use tusk_api::admission_review::{
    API_VERSION, AdmissionRequest, AdmissionResponse, AdmissionReview, GroupVersionKind,
    GroupVersionResource, KIND,
};

use crate::apiserver::auth::user::UserInfo;
use crate::apiserver::error::ApiError;
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;
use matching::Target;

const VALIDATING: &str = "admissionregistration.k8s.io/validatingwebhookconfigurations";
const MUTATING: &str = "admissionregistration.k8s.io/mutatingwebhookconfigurations";

/// One write under review.
pub struct Write<'a> {
    pub resource: &'a Resource,
    pub version: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    pub object: &'a Value,
    pub old: Option<&'a Value>,
    pub dry_run: bool,
    pub user: &'a UserInfo,
}

impl Write<'_> {
    fn target(&self) -> Target<'_> {
        Target {
            group: &self.resource.group,
            version: self.version,
            plural: &self.resource.plural,
            subresource: self.subresource,
            operation: self.operation,
            namespaced: self.resource.namespaced,
        }
    }
}

fn configurations(api: &Api, resource: &str) -> Vec<Arc<Value>> {
    let mut all = api
        .store
        .list(resource, None)
        .map(|(_, items)| items)
        .unwrap_or_default();
    all.sort_by_key(|c| {
        c.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    });
    all
}

fn webhooks(configuration: &Value) -> impl Iterator<Item = &Value> {
    configuration
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Whether some webhook's rules could cover a `operation` of `resource`
/// (selectors aside): a write nothing covers needs no review.
pub fn covered(
    api: &Api,
    resource: &Resource,
    version: &str,
    subresource: Option<&str>,
    operation: &str,
) -> bool {
    let target = Target {
        group: &resource.group,
        version,
        plural: &resource.plural,
        subresource,
        operation,
        namespaced: resource.namespaced,
    };
    [VALIDATING, MUTATING].into_iter().any(|kind| {
        configurations(api, kind)
            .iter()
            .any(|c| webhooks(c).any(|w| matching::rules_match(w, &target)))
    })
}

/// The namespace object whose labels a namespaced write is selected by.
fn namespace_of(api: &Api, write: &Write<'_>) -> Option<Value> {
    if write.resource.group.is_empty() && write.resource.kind == "Namespace" {
        return Some(write.object.clone());
    }
    let namespace = write.namespace.filter(|_| write.resource.namespaced)?;
    let stored = api
        .store
        .get(&ObjectKey::new("/namespaces", "", namespace))
        .ok()
        .flatten();
    Some(stored.map_or_else(|| json!({}), |n| (*n).clone()))
}

fn selected(api: &Api, webhook: &Value, write: &Write<'_>) -> bool {
    matching::rules_match(webhook, &write.target())
        && matching::namespace_matches(webhook, namespace_of(api, write).as_ref())
        && matching::object_matches(webhook, Some(write.object), write.old)
}

/// Reviews `write` with every matching webhook; the first refusal or
/// failed call (under `failurePolicy: Fail`) is the answer.
pub async fn review(api: &Api, write: &Write<'_>) -> Result<(), ApiError> {
    for configuration in configurations(api, MUTATING) {
        if let Some(webhook) = webhooks(&configuration).find(|w| selected(api, w, write)) {
            return Err(ApiError::Internal {
                message: format!(
                    "failed calling webhook {:?}: mutating admission webhooks are not implemented by the sandbox's API server",
                    name_of(webhook)
                ),
            });
        }
    }
    for configuration in configurations(api, VALIDATING) {
        for webhook in webhooks(&configuration).filter(|w| selected(api, w, write)) {
            validate_with(api, webhook, write).await?;
        }
    }
    Ok(())
}

fn name_of(webhook: &Value) -> &str {
    webhook
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

async fn validate_with(api: &Api, webhook: &Value, write: &Write<'_>) -> Result<(), ApiError> {
    let name = name_of(webhook);
    let outcome = if webhook
        .get("matchConditions")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty())
    {
        Err(call::CallError(
            "matchConditions are not evaluated by the sandbox's API server".to_owned(),
        ))
    } else {
        call::call(api, webhook, &review_of(write)).await
    };
    match outcome {
        Ok(response) if response.allowed => Ok(()),
        Ok(response) => Err(refusal(name, &response)),
        Err(call::CallError(reason)) => {
            let policy = webhook.get("failurePolicy").and_then(Value::as_str);
            if policy == Some("Ignore") {
                tracing::warn!(webhook = name, %reason, "failed calling webhook, failing open");
                return Ok(());
            }
            Err(ApiError::Internal {
                message: format!("failed calling webhook {name:?}: {reason}"),
            })
        }
    }
}

/// A refusal as kube-apiserver's `ToStatusErr` makes it.
fn refusal(name: &str, response: &AdmissionResponse) -> ApiError {
    let mut status = response.status.clone().unwrap_or_else(|| json!({}));
    let denied = format!("admission webhook {name:?} denied the request");
    let text = |key: &str| {
        status
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let message = match (text("message"), text("reason")) {
        (Some(message), _) => format!("{denied}: {message}"),
        (None, Some(reason)) => format!("{denied}: {reason}"),
        (None, None) => format!("{denied} without explanation"),
    };
    let succeeded = text("status").is_none_or(|s| s == "Success");
    let code = status.get("code").and_then(Value::as_u64).unwrap_or(0);
    status["code"] = json!(code.max(400));
    if succeeded {
        status["status"] = json!("Failure");
    }
    ApiError::Webhook { status, message }
}

fn review_of(write: &Write<'_>) -> AdmissionReview {
    let resource = write.resource;
    let kind = GroupVersionKind {
        group: resource.group.clone(),
        version: write.version.to_owned(),
        kind: resource.kind.clone(),
    };
    let gvr = GroupVersionResource {
        group: resource.group.clone(),
        version: write.version.to_owned(),
        resource: resource.plural.clone(),
    };
    let options = if write.operation == "CREATE" {
        "CreateOptions"
    } else {
        "UpdateOptions"
    };
    AdmissionReview {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        request: Some(AdmissionRequest {
            uid: uuid::Uuid::new_v4().to_string(),
            kind: kind.clone(),
            resource: gvr.clone(),
            sub_resource: write.subresource.map(str::to_owned),
            request_kind: Some(kind),
            request_resource: Some(gvr),
            name: Some(write.name.to_owned()).filter(|n| !n.is_empty()),
            namespace: write.namespace.map(str::to_owned),
            operation: write.operation.to_owned(),
            user_info: json!({
                "username": write.user.name,
                "uid": write.user.uid,
                "groups": write.user.groups,
            }),
            object: Some(write.object.clone()),
            old_object: write.old.cloned(),
            dry_run: Some(write.dry_run),
            options: Some(json!({"kind": options, "apiVersion": "meta.k8s.io/v1"})),
        }),
        response: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_as_kube_apiservers() {
        let response = AdmissionResponse::invalid("g", "K", "n", "spec.x", "must be y");
        let error = refusal("hook.example", &response);
        assert_eq!(error.code(), 422);
        assert_eq!(
            error.to_string(),
            "admission webhook \"hook.example\" denied the request: spec.x: must be y"
        );
        assert_eq!(error.status()["details"]["causes"][0]["field"], "spec.x");
        let bare = AdmissionResponse {
            allowed: false,
            ..AdmissionResponse::default()
        };
        let error = refusal("hook.example", &bare);
        assert_eq!(error.code(), 400);
        assert_eq!(
            error.to_string(),
            "admission webhook \"hook.example\" denied the request without explanation"
        );
    }
}
