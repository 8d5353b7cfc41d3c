use serde_json::json;
use tusk_api::v1alpha1::PostgresClusterStatus;

use super::*;
use crate::config::OperatorConfig;
use crate::reconcile::primary::tests::{
    now, pod, primary_failed, report, serving, spec, with_status,
};

fn planned<'a>(
    cluster: &'a PostgresCluster,
    observed: &'a Observed,
    valid: &'a ValidatedCluster,
) -> Plan<'a> {
    plan(cluster, valid, observed, now())
}

fn valid(cluster: &PostgresCluster) -> ValidatedCluster {
    crate::validate::validate(cluster, &OperatorConfig::default()).expect("valid")
}

fn annotated(mut cluster: PostgresCluster, key: &str, value: &str) -> PostgresCluster {
    cluster
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_owned(), value.to_owned());
    cluster
}

/// Every instance serves; orders-1 is the primary.
fn healthy() -> Observed {
    let mut observed = primary_failed();
    observed.children.pods[0] = pod("orders-1", true);
    observed
        .reports
        .extend([report("orders-1", "primary", "0/5000000")]);
    for standby in observed.reports.values_mut() {
        standby.ready = true;
    }
    observed
}

#[test]
fn a_new_cluster_creates_its_first_instance_as_primary() {
    let cluster = crate::validate::tests::cluster(spec("required", false));
    let valid = valid(&cluster);
    let observed = Observed::default();
    let plan = planned(&cluster, &observed, &valid);
    assert_eq!(
        plan.instances.step,
        InstanceStep::Create(InstanceName::recorded("orders-1"))
    );
    assert_eq!(plan.new_pod_role, Some(labels::role::PRIMARY));
    assert_eq!(plan.status.target_primary.as_deref(), Some("orders-1"));
    assert_eq!(plan.status.latest_serial, 1);
    assert!(plan.roles.is_empty() && plan.clear.is_empty() && plan.events.is_empty());
}

/// A cluster and what was observed; the target after the pass, the
/// annotations cleared and the events published.
type Case<'a> = (
    &'a PostgresCluster,
    &'a Observed,
    &'a str,
    &'a [&'a str],
    &'a [&'a str],
);

#[test]
fn the_primary_moves_and_used_requests_are_cleared() {
    let failed = primary_failed();
    let ok = healthy();
    let plain = with_status(spec("preferred", false), &serving());
    let requested = annotated(plain.clone(), labels::PROMOTE, "orders-2");
    // Required durability without a synchronous standby blocked promoting
    // orders-3 (1 byte behind); the approval quotes that decision.
    let decision = crate::failover::approval::blocked(None, "orders-1", "orders-3", 1, now());
    let mut blocked = serving();
    blocked.failover = Some(tusk_api::v1alpha1::FailoverStatus {
        blocked: Some(decision.clone()),
    });
    let approved = annotated(
        with_status(spec("required", false), &blocked),
        labels::APPROVE_DATA_LOSS,
        &decision.id,
    );
    let mut paused_spec = spec("preferred", false);
    paused_spec["paused"] = true.into();
    let paused = annotated(
        with_status(paused_spec, &serving()),
        labels::PROMOTE,
        "orders-2",
    );
    // (cluster, observed, target after the pass, annotations cleared, events)
    let cases: [Case<'_>; 5] = [
        (&plain, &ok, "orders-1", &[], &[]),
        (&plain, &failed, "orders-3", &[], &["Failover"]),
        (
            &requested,
            &ok,
            "orders-2",
            &[labels::PROMOTE],
            &["Switchover"],
        ),
        (
            &approved,
            &failed,
            "orders-3",
            &[labels::APPROVE_DATA_LOSS],
            &["ApprovedFailover"],
        ),
        // A paused cluster is observed, never changed.
        (&paused, &failed, "orders-1", &[], &[]),
    ];
    for (cluster, observed, target, cleared, events) in cases {
        let valid = valid(cluster);
        let plan = planned(cluster, observed, &valid);
        assert_eq!(plan.instances.target_primary.as_str(), target);
        assert_eq!(plan.status.target_primary.as_deref(), Some(target));
        assert_eq!(plan.clear, cleared, "{target}");
        let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, events);
        assert_eq!(plan.status.last_failover, plan.primary.record);
    }
}

#[test]
fn a_planned_failover_relabels_the_pods_for_the_new_target() {
    let mut status: PostgresClusterStatus = serving();
    status.instances.truncate(1);
    let cluster = with_status(spec("preferred", false), &status);
    let valid = valid(&cluster);
    let mut observed = primary_failed();
    observed.children.pods[0].metadata.labels =
        Some([(labels::ROLE.to_owned(), labels::role::PRIMARY.to_owned())].into());
    let plan = planned(&cluster, &observed, &valid);
    let labels: Vec<(&str, Option<&str>)> = plan
        .roles
        .iter()
        .map(|r| (r.pod.as_str(), r.role))
        .collect();
    // The failed primary leaves `-rw` at once; the standbys say replica.
    assert_eq!(
        labels,
        [
            ("orders-1", None),
            ("orders-2", Some("replica")),
            ("orders-3", Some("replica"))
        ]
    );
    assert_eq!(json!(plan.status.failover_blocked), json!(null));
}
