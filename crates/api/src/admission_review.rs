//! `admission.k8s.io/v1` AdmissionReview: what an API server sends a
//! validating or mutating webhook, and what the webhook answers. Shared by
//! the operator's webhook and the sandbox's API server, which calls
//! webhooks as kube-apiserver does. Only the fields Tusk reads or writes
//! are typed; the rest pass through as JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The review's `apiVersion`.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The review's `kind`.
pub const KIND: &str = "AdmissionReview";

/// A review: a request from the API server, or the webhook's response.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<AdmissionRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<AdmissionResponse>,
}

/// group, version and kind (or resource) of the object under review.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

/// group, version and resource of the request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

/// What the API server asks about.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    #[serde(default)]
    pub user_info: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
}

/// The webhook's verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    /// Why not, as a `metav1.Status` (code, reason, message, details).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
}

impl AdmissionReview {
    /// The review answering `request` with `response` (its uid copied).
    pub fn answer(request: &AdmissionRequest, mut response: AdmissionResponse) -> Self {
        response.uid.clone_from(&request.uid);
        Self {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            request: None,
            response: Some(response),
        }
    }
}

impl AdmissionResponse {
    /// Admitted.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            ..Self::default()
        }
    }

    /// Refused as an invalid object: HTTP 422 with one cause naming
    /// `field` and `rule`, which kubectl prints as
    /// `The Kind "name" is invalid: field: rule`.
    pub fn invalid(group: &str, kind: &str, name: &str, field: &str, rule: &str) -> Self {
        Self {
            allowed: false,
            status: Some(serde_json::json!({
                "status": "Failure",
                "code": 422,
                "reason": "Invalid",
                "message": format!("{field}: {rule}"),
                "details": {
                    "name": name,
                    "group": group,
                    "kind": kind,
                    "causes": [{"reason": "FieldValueInvalid", "message": rule, "field": field}],
                },
            })),
            ..Self::default()
        }
    }

    /// Refused for a reason that is no field's (an unreadable review).
    pub fn bad_request(message: &str) -> Self {
        Self {
            allowed: false,
            status: Some(serde_json::json!({
                "status": "Failure",
                "code": 400,
                "reason": "BadRequest",
                "message": message,
            })),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_reads_and_answers_with_the_requests_uid() {
        let review: AdmissionReview = serde_json::from_value(serde_json::json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "request": {
                "uid": "u-1", "operation": "CREATE",
                "kind": {"group": "postgres.tusk.dev", "version": "v1alpha1", "kind": "PostgresCluster"},
                "resource": {"group": "postgres.tusk.dev", "version": "v1alpha1", "resource": "postgresclusters"},
                "namespace": "shop", "name": "orders", "userInfo": {"username": "alice"},
                "object": {"spec": {}}, "dryRun": true
            }
        }))
        .expect("a review");
        let request = review.request.expect("a request");
        let answer = AdmissionReview::answer(
            &request,
            AdmissionResponse::invalid("g", "K", "orders", "spec.x", "must be y"),
        );
        let json = serde_json::to_value(&answer).expect("serialises");
        assert_eq!(json["response"]["uid"], "u-1");
        assert_eq!(json["response"]["allowed"], false);
        assert_eq!(
            json["response"]["status"]["details"]["causes"][0]["field"],
            "spec.x"
        );
        assert!(json.get("request").is_none());
    }
}
