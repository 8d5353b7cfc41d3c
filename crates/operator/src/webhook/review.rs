//! The webhook's verdict on one AdmissionReview: the controller's own
//! validation ([`crate::validate::validate`], the code `tusk validate`
//! runs too), so a spec the controller would refuse is refused at
//! `kubectl apply`, naming the field and the rule.
//!
//! Update rules, with the old object:
//! - an update that leaves `spec` as it was is admitted, whatever the spec
//!   holds: a cluster stored before the webhook (or under an older
//!   operator's rules) can still be labelled, have its finalizer removed
//!   and be deleted;
//! - while a major upgrade is pending (the status records the major the
//!   data runs, older than the declared one), parameters are held to the
//!   running major's rules as well: its pods restart with them before the
//!   upgrade moves the data.

use tusk_api::admission_review::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use tusk_api::v1alpha1::PostgresCluster;

use crate::config::OperatorConfig;
use crate::error::SpecError;

/// Answers `review` (an `admission.k8s.io/v1` AdmissionReview request).
pub fn answer(review: &AdmissionReview, config: &OperatorConfig) -> AdmissionReview {
    let Some(request) = &review.request else {
        let request = AdmissionRequest::default();
        return AdmissionReview::answer(
            &request,
            AdmissionResponse::bad_request("the AdmissionReview holds no request"),
        );
    };
    AdmissionReview::answer(request, decide(request, config))
}

/// The verdict on one request.
pub fn decide(request: &AdmissionRequest, config: &OperatorConfig) -> AdmissionResponse {
    let kind = &request.kind;
    if kind.group != tusk_api::GROUP || kind.kind != "PostgresCluster" {
        // Only PostgresClusters are registered; anything else is not ours to judge.
        return AdmissionResponse::allow();
    }
    if !matches!(request.operation.as_str(), "CREATE" | "UPDATE") {
        return AdmissionResponse::allow();
    }
    let Some(object) = &request.object else {
        return AdmissionResponse::bad_request("the request holds no object");
    };
    if let Some(old) = &request.old_object
        && old.get("spec") == object.get("spec")
    {
        return AdmissionResponse::allow();
    }
    let name = request
        .name
        .clone()
        .or_else(|| {
            object
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let refuse = |error: SpecError| {
        AdmissionResponse::invalid(
            tusk_api::GROUP,
            "PostgresCluster",
            &name,
            &error.field,
            &error.rule,
        )
    };
    let mut cluster: PostgresCluster = match serde_json::from_value(object.clone()) {
        Ok(cluster) => cluster,
        Err(error) => {
            return AdmissionResponse::bad_request(&format!(
                "the object is not a PostgresCluster this operator reads: {error}"
            ));
        }
    };
    identify(&mut cluster, request);
    match check(&cluster, config) {
        Ok(()) => AdmissionResponse::allow(),
        Err(error) => refuse(error),
    }
}

/// What the controller refuses in `cluster`, at admission.
pub fn check(cluster: &PostgresCluster, config: &OperatorConfig) -> Result<(), SpecError> {
    let valid = crate::validate::validate(cluster, config)?;
    let running = cluster
        .status
        .as_ref()
        .and_then(|s| s.postgres_version)
        .and_then(|v| u32::try_from(v).ok());
    if let Some(running) = running.filter(|r| *r != valid.version) {
        crate::validate::check_parameters_for(cluster, running)?;
    }
    Ok(())
}

/// The identity validation needs and a create's object may not carry yet
/// (a dry run, a server that assigns the uid later).
fn identify(cluster: &mut PostgresCluster, request: &AdmissionRequest) {
    let meta = &mut cluster.metadata;
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = request.namespace.clone();
    }
    if meta.name.as_deref().unwrap_or_default().is_empty() {
        meta.name = request.name.clone();
    }
    if meta.uid.as_deref().unwrap_or_default().is_empty() {
        meta.uid = Some("00000000-0000-0000-0000-000000000000".to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn request(operation: &str, object: Value, old: Option<Value>) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u-1",
            "operation": operation,
            "kind": {"group": "postgres.tusk.dev", "version": "v1alpha1", "kind": "PostgresCluster"},
            "resource": {"group": "postgres.tusk.dev", "version": "v1alpha1", "resource": "postgresclusters"},
            "namespace": "shop",
            "name": "orders",
            "object": object,
            "oldObject": old,
        }))
        .expect("a request")
    }

    fn cluster(version: u32, parameters: Value) -> Value {
        json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1",
            "kind": "PostgresCluster",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": {
                "instances": 1,
                "postgres": {"version": version, "parameters": parameters},
                "storage": {"size": "1Gi"}
            }
        })
    }

    fn cause(response: &AdmissionResponse) -> (String, String) {
        let status = response.status.clone().unwrap_or_default();
        let cause = &status["details"]["causes"][0];
        (
            cause["field"].as_str().unwrap_or_default().to_owned(),
            cause["message"].as_str().unwrap_or_default().to_owned(),
        )
    }

    #[test]
    fn a_spec_the_controller_refuses_is_refused_naming_field_and_rule() {
        let config = OperatorConfig::default();
        let verdict = decide(
            &request(
                "CREATE",
                cluster(15, json!({"shared_buffers": "Retain"})),
                None,
            ),
            &config,
        );
        assert!(!verdict.allowed);
        let (field, rule) = cause(&verdict);
        assert_eq!(field, "spec.postgres.parameters.shared_buffers");
        assert!(rule.contains("integer"), "{rule}");

        let verdict = decide(
            &request(
                "CREATE",
                cluster(15, json!({"transaction_timeout": "5s"})),
                None,
            ),
            &config,
        );
        assert_eq!(
            cause(&verdict).0,
            "spec.postgres.parameters.transaction_timeout"
        );
        let verdict = decide(
            &request(
                "CREATE",
                cluster(17, json!({"transaction_timeout": "5s"})),
                None,
            ),
            &config,
        );
        assert!(verdict.allowed, "{verdict:?}");

        let mut bad = cluster(15, json!({}));
        bad["spec"]["resources"] = json!({"requests": {"memory": "-1Gi"}});
        let verdict = decide(&request("CREATE", bad, None), &config);
        assert_eq!(cause(&verdict).0, "spec.resources.requests.memory");
    }

    #[test]
    fn an_update_that_leaves_the_spec_alone_is_admitted_even_when_invalid() {
        let stored = cluster(15, json!({"shared_buffers": "Retain"}));
        let mut finalized = stored.clone();
        finalized["metadata"]["finalizers"] = json!([]);
        let verdict = decide(
            &request("UPDATE", finalized, Some(stored.clone())),
            &OperatorConfig::default(),
        );
        assert!(verdict.allowed, "{verdict:?}");
        let changed = cluster(15, json!({"shared_buffers": "Keep"}));
        let verdict = decide(
            &request("UPDATE", changed, Some(stored)),
            &OperatorConfig::default(),
        );
        assert!(!verdict.allowed);
    }

    #[test]
    fn a_pending_major_upgrade_holds_parameters_to_the_running_major() {
        let old = cluster(16, json!({}));
        let mut upgraded = cluster(17, json!({"transaction_timeout": "5s"}));
        upgraded["spec"]["upgrade"] = json!({"approvedVersion": 17});
        upgraded["status"] = json!({"postgresVersion": 16});
        let verdict = decide(
            &request("UPDATE", upgraded.clone(), Some(old.clone())),
            &OperatorConfig::default(),
        );
        assert_eq!(
            cause(&verdict).0,
            "spec.postgres.parameters.transaction_timeout"
        );
        upgraded["status"] = json!({"postgresVersion": 17});
        let verdict = decide(
            &request("UPDATE", upgraded, Some(old)),
            &OperatorConfig::default(),
        );
        assert!(verdict.allowed, "{verdict:?}");
    }

    #[test]
    fn the_answer_carries_the_requests_uid() {
        let review = AdmissionReview {
            api_version: "admission.k8s.io/v1".into(),
            kind: "AdmissionReview".into(),
            request: Some(request("CREATE", cluster(15, json!({})), None)),
            response: None,
        };
        let answer = answer(&review, &OperatorConfig::default());
        let response = answer.response.expect("a response");
        assert_eq!(response.uid, "u-1");
        assert!(response.allowed);
    }
}
