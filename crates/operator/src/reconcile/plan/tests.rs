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
    let outdated = Outdated {
        members: rolling::members(valid, &OperatorConfig::default(), observed),
        slot: false,
    };
    plan(cluster, valid, observed, &outdated, now())
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

/// `observed` with every pod built from `spec`'s template (stamped with its
/// fingerprint) and every standby streaming.
fn built_from(spec: serde_json::Value, mut observed: Observed) -> Observed {
    let before = valid(&crate::validate::tests::cluster(spec));
    for pod in &mut observed.children.pods {
        let instance = InstanceName::recorded(&pod.name_any());
        let fingerprint =
            crate::builders::pod_fingerprint(&before, &OperatorConfig::default(), &instance);
        pod.metadata.annotations =
            Some([(labels::POD_TEMPLATE.to_owned(), fingerprint.text())].into());
    }
    let standbys: Vec<String> = observed
        .reports
        .values()
        .filter(|r| r.role == tusk_api::instance::InstanceRole::Replica)
        .map(|r| r.name.clone())
        .collect();
    for report in observed.reports.values_mut() {
        report.streaming = Some(report.role == tusk_api::instance::InstanceRole::Replica);
        if report.role == tusk_api::instance::InstanceRole::Primary {
            report.standbys = standbys
                .iter()
                .map(|name| {
                    serde_json::from_value(
                        json!({"name": name, "state": "streaming", "syncState": "quorum"}),
                    )
                    .expect("a standby")
                })
                .collect();
        }
    }
    observed
}

fn resized(memory: &str, method: &str) -> serde_json::Value {
    let mut spec = spec("preferred", false);
    spec["resources"] = json!({"requests": {"memory": memory}});
    spec["upgrade"] = json!({"primaryUpdateMethod": method});
    spec
}

#[test]
fn a_resources_change_rolls_replicas_first_then_switches_over_to_the_most_advanced() {
    let cluster = with_status(resized("512Mi", "switchover"), &serving());
    let valid = valid(&cluster);
    // Every pod runs the template from before the change.
    let observed = built_from(resized("256Mi", "switchover"), healthy());
    let plan = planned(&cluster, &observed, &valid);
    assert_eq!(
        plan.instances.step,
        InstanceStep::ReplacePod(InstanceName::recorded("orders-2"))
    );
    let rollout = plan.status.rollout.clone().expect("a rollout in status");
    assert_eq!(
        (rollout.step.as_str(), rollout.instance.as_deref()),
        ("ReplacingReplica", Some("orders-2"))
    );
    assert_eq!(rollout.reason, "changed: spec.resources");
    assert_eq!(rollout.outdated, ["orders-1", "orders-2", "orders-3"]);
    let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["RollingUpdate"]);

    // The replicas are done: the primary switches over to orders-3, the
    // standby that received the most WAL; nothing is deleted.
    let mut observed = built_from(resized("512Mi", "switchover"), healthy());
    let old = built_from(resized("256Mi", "switchover"), healthy());
    observed.children.pods[0] = old.children.pods[0].clone();
    let plan = planned(&cluster, &observed, &valid);
    assert_eq!(plan.instances.step, InstanceStep::Steady);
    assert_eq!(plan.status.target_primary.as_deref(), Some("orders-3"));
    let record = plan.primary.record.clone().expect("a switchover");
    assert_eq!(
        (record.from.as_str(), record.reason.as_str()),
        ("orders-1", "Switchover")
    );

    // With primaryUpdateMethod: restart the primary restarts in place.
    let restart = with_status(resized("512Mi", "restart"), &serving());
    let valid = self::valid(&restart);
    let mut observed = built_from(resized("512Mi", "restart"), healthy());
    let old = built_from(resized("256Mi", "restart"), healthy());
    observed.children.pods[0] = old.children.pods[0].clone();
    let plan = planned(&restart, &observed, &valid);
    assert_eq!(
        plan.instances.step,
        InstanceStep::ReplacePod(InstanceName::recorded("orders-1"))
    );
    assert_eq!(plan.status.target_primary.as_deref(), Some("orders-1"));
}

#[test]
fn a_paused_rollout_replaces_nothing_and_says_so() {
    let cluster = annotated(
        with_status(resized("512Mi", "switchover"), &serving()),
        labels::PAUSE_ROLLOUT,
        "true",
    );
    let valid = valid(&cluster);
    let observed = built_from(resized("256Mi", "switchover"), healthy());
    let plan = planned(&cluster, &observed, &valid);
    assert_eq!(plan.instances.step, InstanceStep::Steady);
    assert_eq!(
        plan.status.rollout.map(|r| r.step),
        Some("Paused".to_owned())
    );
    assert!(plan.events.is_empty());
}

#[test]
fn a_pod_still_terminating_is_not_recreated_over() {
    let cluster = with_status(resized("512Mi", "switchover"), &serving());
    let valid = valid(&cluster);
    let mut observed = built_from(resized("256Mi", "switchover"), healthy());
    observed.children.pods[1].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    observed.children.volumes = ["orders-1", "orders-2", "orders-3"]
        .iter()
        .map(|name| serde_json::from_value(json!({"metadata": {"name": name}})).expect("a claim"))
        .collect();
    let plan = planned(&cluster, &observed, &valid);
    assert_eq!(
        plan.instances.step,
        InstanceStep::WaitForReady(InstanceName::recorded("orders-2"))
    );
}

/// A declared major version is an upgrade, which only the upgrade's steps
/// carry out: a pod re-created meanwhile (any restart) must keep the
/// data's major, or its instance manager refuses the data
/// (`VersionMismatch`) forever.
#[test]
fn a_declared_major_version_is_held_so_a_recreated_pod_runs_its_data() {
    let mut declared = spec("preferred", false);
    declared["postgres"]["version"] = 16.into();
    declared["upgrade"] = json!({"approvedVersion": 16});
    let mut status = serving();
    status.postgres_version = Some(15);
    let cluster = with_status(declared.clone(), &status);
    let config = OperatorConfig::default();
    let mut observed = healthy();
    observed.children.pods.remove(1);
    observed.children.volumes = ["orders-1", "orders-2", "orders-3"]
        .iter()
        .map(|name| serde_json::from_value(json!({"metadata": {"name": name}})).expect("a claim"))
        .collect();
    let valid = crate::reconcile::validate::validate(&cluster, &config, &observed).expect("valid");
    let plan = planned(&cluster, &observed, &valid);
    let instance = InstanceName::recorded("orders-2");
    assert_eq!(
        plan.instances.step,
        InstanceStep::RecreatePod(instance.clone())
    );
    let pod = crate::builders::instance_pod(&valid, &config, &instance, None);
    let container = &pod.spec.expect("spec").containers[0];
    assert_eq!(container.image.as_deref(), Some("postgres:15"));
    let bin_dir = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == crate::builders::InstanceEnv::PG_BIN_DIR)
        .and_then(|e| e.value.clone());
    assert_eq!(bin_dir.as_deref(), Some("/usr/lib/postgresql/15/bin"));
    // The declared major is the upgrade's target, which waits here for a
    // backup: nothing is stopped, and the instances go on with 15.
    assert_eq!(
        valid
            .major_upgrade
            .as_ref()
            .map(|t| (t.version, t.image.as_str())),
        Some((16, "postgres:16"))
    );
    assert!(valid.unsupported.is_empty(), "{:?}", valid.unsupported);
    assert_eq!(
        plan.upgrade.record.as_ref().map(|r| r.step.as_str()),
        Some(crate::upgrade::WAITING_FOR_BACKUP)
    );
    assert!(!plan.upgrade.holds_instances);
    assert_eq!(plan.status.postgres_version, Some(15));

    // A cluster from before the record: its instances say what they run.
    let cluster = with_status(declared, &serving());
    let mut observed = healthy();
    for report in observed.reports.values_mut() {
        report.postgres_version = Some("15.8".to_owned());
    }
    let valid = crate::reconcile::validate::validate(&cluster, &config, &observed).expect("valid");
    assert_eq!(valid.version, 15);
}

/// `primaryUpdateMethod: restart`: the primary the rollout restarts in
/// place is not failed over while it comes back, for at most
/// `promotionTimeoutSeconds` (30 s) from it turning unavailable.
#[test]
fn a_primary_restarted_in_place_is_not_failed_over_while_it_comes_back() {
    let restarting = |down_since: &str| {
        let mut status = serving();
        status.rollout = Some(tusk_api::v1alpha1::RolloutStatus {
            step: "RestartingPrimary".to_owned(),
            instance: Some("orders-1".to_owned()),
            reason: "changed: spec.resources".to_owned(),
            ..Default::default()
        });
        status.conditions[0].last_transition_time =
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                down_since.parse().expect("a time"),
            );
        with_status(resized("512Mi", "restart"), &status)
    };
    let failed = primary_failed();
    // Down for 10 s (the delay of 5 s is over): held.
    let held = restarting("2026-01-01T10:00:50Z");
    let held_valid = valid(&held);
    let plan = planned(&held, &failed, &held_valid);
    assert_eq!(plan.status.target_primary.as_deref(), Some("orders-1"));
    assert!(plan.primary.record.is_none() && plan.events.is_empty());
    // Down for 60 s: the restart failed; a failover replaces it.
    let overdue = restarting("2026-01-01T10:00:00Z");
    let overdue_valid = valid(&overdue);
    let plan = planned(&overdue, &failed, &overdue_valid);
    assert_eq!(plan.status.target_primary.as_deref(), Some("orders-3"));
}

/// The pass after orders-3 was created, before the caches show it: it is
/// waited for, not counted missing (which created orders-4, one instance
/// too many, removed again a pass later).
#[test]
fn an_instance_created_and_not_yet_cached_is_waited_for_not_created_again() {
    let cluster = with_status(spec("preferred", false), &serving());
    let valid = valid(&cluster);
    let mut lagging = healthy();
    lagging.children.pods.retain(|p| p.name_any() != "orders-3");
    lagging.reports.remove("orders-3");
    let plan = planned(&cluster, &lagging, &valid);
    assert_eq!(
        (plan.instances.step.clone(), plan.status.latest_serial),
        (InstanceStep::Create(InstanceName::recorded("orders-4")), 4),
        "without the memory of the creation, the cache's lag looks like a missing instance"
    );
    lagging.awaited = Some("orders-3".to_owned());
    let plan = planned(&cluster, &lagging, &valid);
    assert_eq!(
        (plan.instances.step.clone(), plan.status.latest_serial),
        (
            InstanceStep::WaitForReady(InstanceName::recorded("orders-3")),
            3
        )
    );
}

/// Paused and given a fourth instance: the plan still says what it would
/// create (for `tusk plan`), but no serial is handed out, so the instance
/// created once resumed is orders-4, not orders-5.
#[test]
fn a_paused_cluster_hands_out_no_serial() {
    let mut paused = spec("preferred", false);
    paused["paused"] = true.into();
    paused["instances"] = 4.into();
    let cluster = with_status(paused, &serving());
    let valid = valid(&cluster);
    let observed = healthy();
    let plan = planned(&cluster, &observed, &valid);
    assert_eq!(
        plan.instances.step,
        InstanceStep::Create(InstanceName::recorded("orders-4"))
    );
    assert_eq!(plan.status.latest_serial, 3);
}

/// With no instance to take them, the schedule's backups would pile up
/// one per slot; one waits at a time, and the status says so.
#[test]
fn a_due_slot_waits_for_the_schedules_backup_that_has_not_started() {
    let mut spec = spec("required", false);
    spec["backup"] = json!({"destination": {"url": "s3://b/o"}, "schedule": "* * * * *"});
    let mut cluster = crate::validate::tests::cluster(spec);
    cluster.metadata.creation_timestamp =
        Some(Time("2026-01-01T09:00:00Z".parse().expect("a time")));
    let valid = valid(&cluster);
    let pending: tusk_api::v1alpha1::PostgresBackup = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresBackup",
        "metadata": {"name": "orders-20260101100000", "namespace": "shop",
            "creationTimestamp": "2026-01-01T10:00:00Z",
            "ownerReferences": [{"apiVersion": "postgres.tusk.dev/v1alpha1",
                "kind": "PostgresCluster", "name": "orders", "uid": "0c1d-uid", "controller": true}]},
        "spec": {"cluster": "orders"},
        "status": {"phase": "Pending"},
    }))
    .expect("a backup");

    let mut nothing_waits = primary_failed();
    nothing_waits.backups = Some(Vec::new());
    let plan = planned(&cluster, &nothing_waits, &valid);
    let due = plan.backups.scheduled.as_ref().map(|s| s.name.as_str());
    assert_eq!(due, Some("orders-20260101100100"));

    let mut one_waits = primary_failed();
    one_waits.backups = Some(vec![pending]);
    let plan = planned(&cluster, &one_waits, &valid);
    assert_eq!(plan.backups.scheduled, None, "no second pending backup");
    let Some(Some((_, _, message))) = &plan.status.backup_condition else {
        panic!(
            "LastBackupRecent judged: {:?}",
            plan.status.backup_condition
        );
    };
    assert!(
        message
            .contains("the schedule waits for its PostgresBackup orders-20260101100000 to start"),
        "{message}"
    );
}
