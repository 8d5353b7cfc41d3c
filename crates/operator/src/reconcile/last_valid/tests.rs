use serde_json::{Value, json};
use tusk_api::v1alpha1::PostgresClusterStatus;

use super::*;
use crate::error::ErrorCategory;
use crate::plan::InstanceStep;
use crate::reconcile::primary::tests::{now, pod, serving, spec};
use crate::validate::tests::cluster;

const REFUSED_FIELD: &str = "spec.postgres.parameters.shared_buffers";

fn with_buffers(value: &str) -> Value {
    let mut spec = spec("preferred", false);
    spec["postgres"]["parameters"] = json!({"shared_buffers": value});
    spec
}

/// A cluster declaring `declared` (generation 4) whose status recorded
/// `recorded` as valid at generation 3.
fn declared_after(declared: Value, recorded: Option<Value>) -> PostgresCluster {
    let mut cluster = cluster(declared);
    let mut status: PostgresClusterStatus = serving();
    status.last_valid_spec = recorded.map(|spec| LastValidSpec {
        generation: 3,
        spec,
    });
    cluster.status = Some(status);
    cluster
}

/// Every instance has its volume; orders-1's pod is gone.
fn pod_lost() -> Observed {
    let mut observed = Observed::default();
    observed.children.pods = vec![pod("orders-2", true), pod("orders-3", true)];
    observed.children.volumes = ["orders-1", "orders-2", "orders-3"]
        .iter()
        .map(|name| {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"resources": {"requests": {"storage": "500Gi"}}},
            }))
            .expect("a claim")
        })
        .collect();
    observed
}

fn chosen(cluster: &PostgresCluster, observed: &Observed) -> Result<Target, Error> {
    choose(cluster, &OperatorConfig::default(), observed)
}

#[test]
fn a_valid_spec_is_converged_to_and_recorded() {
    let declared = declared_after(with_buffers("32MB"), Some(with_buffers("16MB")));
    let target = chosen(&declared, &pod_lost()).expect("valid");
    assert!(target.refused.is_none());
    assert_eq!(target.valid.parameters["shared_buffers"], "32MB");
    assert_eq!(target.cluster.metadata.generation, Some(4));
    let record = target.record().expect("a record");
    assert_eq!(record.generation, 4);
    assert_eq!(
        record.spec["postgres"]["parameters"]["shared_buffers"],
        "32MB"
    );
}

#[test]
fn an_invalid_spec_keeps_the_last_valid_one_and_names_the_field() {
    let declared = declared_after(with_buffers("Retain"), Some(with_buffers("16MB")));
    let target = chosen(&declared, &pod_lost()).expect("the last valid spec kept");
    assert_eq!(
        target.valid.parameters["shared_buffers"], "16MB",
        "nothing of the invalid change"
    );
    assert_eq!(target.cluster.metadata.generation, Some(3));
    assert_eq!(target.record(), None, "the record stays as it is");
    let refusal = target.refused.as_ref().expect("refused");
    assert_eq!(refusal.error.category(), ErrorCategory::InvalidSpec);
    assert_eq!(refusal.kept, 3);
    let message = refusal.message();
    assert!(message.starts_with(REFUSED_FIELD), "{message}");
    assert!(message.contains("generation 3"), "{message}");
}

#[test]
fn the_status_of_a_kept_spec_says_invalid_spec_for_the_declared_generation() {
    let declared = declared_after(with_buffers("Retain"), Some(with_buffers("16MB")));
    let observed = pod_lost();
    let target = chosen(&declared, &observed).expect("kept");
    let mut status = StatusInput::unplanned(
        &target.cluster,
        &observed.children.pods,
        3,
        &observed.reports,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
    );
    target.describe(&mut status, &declared);
    assert_eq!(status.generation, Some(4));
    assert_eq!(status.valid_spec, None);
    let (category, message) = status.failure.clone().expect("a failure");
    assert_eq!(category, ErrorCategory::InvalidSpec);
    let composed = crate::status::compose(&status);
    assert_eq!(composed.observed_generation, Some(4));
    let degraded = composed
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded")
        .expect("Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "InvalidSpec")
    );
    assert_eq!(degraded.message, message);
    assert_eq!(
        composed.last_valid_spec.map(|r| r.generation),
        Some(3),
        "the record is kept"
    );
}

#[test]
fn a_lost_pod_is_recreated_as_the_last_valid_spec_declares_it() {
    let declared = declared_after(with_buffers("Retain"), Some(with_buffers("16MB")));
    let observed = pod_lost();
    let target = chosen(&declared, &observed).expect("kept");
    let config = OperatorConfig::default();
    let outdated = crate::reconcile::rollout::Outdated {
        members: crate::reconcile::rollout::members(&target.valid, &config, &observed),
        slot: false,
    };
    let plan =
        crate::reconcile::plan::plan(&target.cluster, &target.valid, &observed, &outdated, now());
    assert_eq!(
        plan.instances.step,
        InstanceStep::RecreatePod(crate::names::InstanceName::recorded("orders-1"))
    );
}

#[test]
fn a_cluster_never_valid_is_refused_and_nothing_is_kept() {
    let declared = declared_after(with_buffers("Retain"), None);
    let error = chosen(&declared, &pod_lost()).expect_err("nothing to keep");
    assert_eq!(error.category(), ErrorCategory::InvalidSpec);
    assert!(error.to_string().starts_with(REFUSED_FIELD), "{error}");
}

#[test]
fn a_record_that_is_not_a_valid_spec_keeps_nothing() {
    // Written by hand, by an older operator, or valid under rules since
    // tightened: the declared spec's refusal is what is reported.
    let mut no_instances = with_buffers("16MB");
    no_instances["instances"] = 0.into();
    for recorded in [json!({"instances": "three"}), no_instances] {
        let declared = declared_after(with_buffers("Retain"), Some(recorded.clone()));
        let error = chosen(&declared, &pod_lost()).expect_err("nothing usable");
        assert!(
            error.to_string().starts_with(REFUSED_FIELD),
            "{recorded}: {error}"
        );
    }
}

#[test]
fn a_refused_storage_shrink_keeps_the_recorded_size() {
    let mut shrunk = with_buffers("16MB");
    shrunk["storage"]["size"] = "400Gi".into();
    let declared = declared_after(shrunk, Some(with_buffers("16MB")));
    let target = chosen(&declared, &pod_lost()).expect("kept");
    assert_eq!(target.valid.storage_size.0, "500Gi");
    let refusal = target.refused.as_ref().expect("refused");
    assert_eq!(refusal.error.category(), ErrorCategory::RefusedChange);
}

#[test]
fn a_pause_declared_with_an_invalid_spec_is_honoured() {
    let mut paused = with_buffers("Retain");
    paused["paused"] = true.into();
    let declared = declared_after(paused, Some(with_buffers("16MB")));
    let target = chosen(&declared, &pod_lost()).expect("kept");
    assert!(
        target.valid.paused,
        "a person asked the operator to stop acting"
    );
    assert_eq!(target.valid.parameters["shared_buffers"], "16MB");
}
