use super::*;

fn at(seconds: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid"))
}

fn input<'a>(
    previous: Option<&'a PostgresClusterStatus>,
    reports: &'a BTreeMap<String, InstanceReport>,
    now: Time,
) -> StatusInput<'a> {
    StatusInput {
        previous,
        generation: Some(2),
        declared: 1,
        pods: &[],
        volumes: 0,
        reports,
        target_primary: Some("orders-1".into()),
        latest_serial: 1,
        deleting: false,
        failure: None,
        unsupported: &[],
        primary_available: None,
        failover_blocked: None,
        promotion_stalled: None,
        last_failover: None,
        lease_takeover: None,
        rollout: None,
        postgres_version: None,
        archive: None,
        backups: None,
        rehearsal: None,
        rehearsal_condition: None,
        backup_condition: None,
        upgrade: None,
        upgrading: false,
        upgrade_condition: None,
        valid_spec: None,
        now,
    }
}

#[test]
fn a_rehearsal_is_recorded_and_its_condition_kept_until_judged_again() {
    let reports = BTreeMap::new();
    let record = tusk_api::v1alpha1::RestoreVerification {
        time: at(1000),
        backup_id: "20261204-100000F".into(),
        succeeded: false,
        duration_seconds: Some(4.0),
        recovery_point: None,
        failed_check: Some("sentinel".into()),
        message: Some("no row".into()),
    };
    let mut first = input(None, &reports, at(1000));
    first.rehearsal = Some(record.clone());
    first.rehearsal_condition = Some(Some((
        tusk_api::conditions::ConditionStatus::False,
        "RehearsalFailed",
        "check sentinel failed".into(),
    )));
    let status = compose(&first);
    assert_eq!(status.last_restore_verification, Some(record.clone()));
    let condition = |s: &PostgresClusterStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == tusk_api::conditions::RESTORE_REHEARSED)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    assert_eq!(
        condition(&status),
        Some(("False".into(), "RehearsalFailed".into()))
    );
    // A pass that did not judge it keeps both.
    let kept = compose(&input(Some(&status), &reports, at(1010)));
    assert_eq!(kept.last_restore_verification, Some(record));
    assert_eq!(condition(&kept), condition(&status));
    // Rehearsals no longer declared: the condition goes.
    let mut undeclared = input(Some(&kept), &reports, at(1020));
    undeclared.rehearsal_condition = Some(None);
    assert_eq!(condition(&compose(&undeclared)), None);
}

#[test]
fn an_unchanged_status_is_not_written_until_the_heartbeat() {
    let reports = BTreeMap::new();
    let first =
        to_write(None, compose(&input(None, &reports, at(1000))), &at(1000)).expect("first write");
    assert_eq!(first.phase, Some(ClusterPhase::Pending));
    assert_eq!(first.observed_generation, Some(2));
    let again = compose(&input(Some(&first), &reports, at(1010)));
    assert!(
        to_write(Some(&first), again.clone(), &at(1010)).is_none(),
        "a converged reconcile writes nothing"
    );
    let later = compose(&input(Some(&first), &reports, at(1000 + HEARTBEAT_SECONDS)));
    assert!(to_write(Some(&first), later, &at(1000 + HEARTBEAT_SECONDS)).is_some());
}

#[test]
fn the_ready_condition_says_why_instances_wait() {
    let reports = BTreeMap::new();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orders-1"},
        "status": {"containerStatuses": [{
            "name": "postgres", "image": "nothing:15", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImageNotMapped", "message": "no rule matches image nothing:15"}}
        }]}
    }))
    .expect("pod");
    let pods = [pod];
    let mut waiting = input(None, &reports, at(5));
    waiting.pods = &pods;
    let status = compose(&waiting);
    let ready = conditions::find_condition(&status.conditions, conditions::READY).expect("Ready");
    assert_eq!(ready.status, "False");
    assert!(
        ready
            .message
            .contains("orders-1: ImageNotMapped: no rule matches image nothing:15"),
        "{}",
        ready.message
    );
}

#[test]
fn a_promotion_is_under_way_until_the_chosen_instance_serves() {
    let record = tusk_api::v1alpha1::FailoverRecord {
        time: MicroTime(at(100).0),
        from: "db-1".into(),
        to: "db-2".into(),
        reason: "Switchover".into(),
        lsn_gap_bytes: 0,
        recovery_point: None,
        abandoned: vec![],
        duration_seconds: None,
    };
    let status =
        |current: Option<&str>, target: Option<&str>, record: Option<&_>| PostgresClusterStatus {
            current_primary: current.map(Into::into),
            target_primary: target.map(Into::into),
            last_failover: record.cloned(),
            ..PostgresClusterStatus::default()
        };
    // Chosen, and (in every status after the decision) no current primary.
    assert!(promotion_under_way(&status(
        None,
        Some("db-2"),
        Some(&record)
    )));
    assert!(promotion_under_way(&status(
        Some("db-1"),
        Some("db-2"),
        Some(&record)
    )));
    // Serving.
    assert!(!promotion_under_way(&status(
        Some("db-2"),
        Some("db-2"),
        Some(&record)
    )));
    // A first primary still bootstrapping, or one after an older failover.
    assert!(!promotion_under_way(&status(None, Some("db-1"), None)));
    assert!(!promotion_under_way(&status(
        None,
        Some("db-3"),
        Some(&record)
    )));
}

#[test]
fn a_failover_record_times_the_promotion_once_the_new_primary_serves() {
    let mut record = tusk_api::v1alpha1::FailoverRecord {
        time: MicroTime(at(100).0),
        from: "db-1".into(),
        to: "db-2".into(),
        reason: "Failover".into(),
        lsn_gap_bytes: 0,
        recovery_point: None,
        abandoned: vec![],
        duration_seconds: Some(5.0),
    };
    promoted(&mut record, Some("db-1"), None, &at(101));
    assert_eq!(record.duration_seconds, Some(5.0), "not promoted yet");
    promoted(&mut record, None, Some("db-2"), &at(102));
    assert_eq!(record.duration_seconds, Some(7.0));
    assert_eq!(record.time, MicroTime(at(102).0));
    promoted(&mut record, Some("db-2"), Some("db-2"), &at(200));
    assert_eq!(record.duration_seconds, Some(7.0), "counted once");
}

#[test]
fn unsupported_features_are_reported_not_ignored() {
    let reports = BTreeMap::new();
    let unsupported = vec!["spec.backup (base backups and WAL archiving)".to_owned()];
    let mut with = input(None, &reports, at(5));
    with.unsupported = &unsupported;
    let status = compose(&with);
    let condition =
        conditions::find_condition(&status.conditions, conditions::UNSUPPORTED).expect("reported");
    assert!(condition.message.contains("spec.backup"));
    let without = compose(&input(Some(&status), &reports, at(6)));
    assert!(conditions::find_condition(&without.conditions, conditions::UNSUPPORTED).is_none());
}

#[test]
fn a_kept_copy_is_shown_and_remembered_while_the_instance_is_silent() {
    let pod: Pod =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "orders-2"}})).expect("pod");
    let report: InstanceReport = serde_json::from_value(serde_json::json!({
        "name": "orders-2", "role": "replica", "phase": "running", "ready": true,
        "fenced": false, "keptCopy": "/var/lib/postgresql/data/pgdata.replaced",
    }))
    .expect("a report");
    let reports = BTreeMap::from([("orders-2".to_owned(), report)]);
    let seen = instance_status(&pod, &reports, None, None, &at(5));
    assert_eq!(
        seen.kept_copy.as_deref(),
        Some("/var/lib/postgresql/data/pgdata.replaced")
    );
    let silent = instance_status(&pod, &BTreeMap::new(), Some(&seen), None, &at(5));
    assert_eq!(silent.kept_copy, seen.kept_copy);
}

#[test]
fn base_backups_progress_reaches_status_backup_and_a_finished_one_clears_running() {
    use crate::status::BackupProgress;
    use tusk_api::v1alpha1::{BackupAssignment, BackupType};
    let reports = BTreeMap::new();
    let running = BackupAssignment {
        backup: "nightly".into(),
        instance: "orders-1".into(),
        backup_type: BackupType::Full,
        primary_server: None,
    };
    let mut assigned = input(None, &reports, at(1000));
    assigned.backups = Some(BackupProgress {
        running: Some(running.clone()),
        ..BackupProgress::default()
    });
    let first = compose(&assigned);
    assert_eq!(
        first.backup.as_ref().and_then(|b| b.running.clone()),
        Some(running)
    );

    let mut done = input(Some(&first), &reports, at(1060));
    done.backups = Some(BackupProgress {
        completed: Some(("20261204-100000F".into(), at(1050))),
        scheduled: Some(at(900)),
        ..BackupProgress::default()
    });
    let second = compose(&done);
    let backup = second.backup.clone().expect("status.backup");
    assert_eq!(backup.running, None);
    assert_eq!(
        backup.last_successful_backup.as_deref(),
        Some("20261204-100000F")
    );
    assert_eq!(backup.last_successful_backup_time, Some(at(1050)));
    assert_eq!(backup.last_scheduled_backup, Some(at(900)));

    // A pass that did not judge backups keeps what was recorded.
    let kept = compose(&input(Some(&second), &reports, at(1100)));
    assert_eq!(kept.backup, second.backup);
}

/// During a switchover or failover the current primary is unset and the
/// cluster Degraded: a served cluster never goes back to Provisioning.
#[test]
fn a_cluster_that_failed_over_is_never_provisioning_again() {
    let reports = BTreeMap::new();
    let previous = PostgresClusterStatus {
        phase: Some(ClusterPhase::Degraded),
        current_primary: None,
        last_failover: Some(tusk_api::v1alpha1::FailoverRecord {
            time: MicroTime(at(100).0),
            from: "orders-2".into(),
            to: "orders-1".into(),
            reason: "Switchover".into(),
            lsn_gap_bytes: 0,
            recovery_point: None,
            abandoned: vec![],
            duration_seconds: None,
        }),
        ..PostgresClusterStatus::default()
    };
    let mut pass = input(Some(&previous), &reports, at(101));
    pass.volumes = 1;
    assert_eq!(compose(&pass).phase, Some(ClusterPhase::Degraded));
    let fresh = PostgresClusterStatus {
        last_failover: None,
        ..previous.clone()
    };
    let mut first = input(Some(&fresh), &reports, at(101));
    first.volumes = 1;
    assert_eq!(
        compose(&first).phase,
        Some(ClusterPhase::Provisioning),
        "a first bootstrap still is"
    );
}

/// A pod the scheduler placed nowhere is said in the instance's entry and
/// in the Ready condition's reason and message, in the scheduler's words.
#[test]
fn an_unschedulable_instance_is_reported_in_its_entry_and_the_ready_condition() {
    use tusk_api::v1alpha1::SchedulingReason;
    let reports = BTreeMap::new();
    let message = "0/0 nodes are available: no nodes available to schedule pods.";
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orders-1", "creationTimestamp": "1970-01-01T00:00:01Z"},
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": "1970-01-01T00:00:02Z",
        }]}
    }))
    .expect("pod");
    let pods = [pod];
    let mut pending = input(None, &reports, at(5));
    pending.pods = &pods;
    let status = compose(&pending);
    let entry = status.instances[0]
        .unscheduled
        .clone()
        .expect("unscheduled");
    assert_eq!(entry.reason, SchedulingReason::Unschedulable);
    assert_eq!(entry.message, message);
    let ready = conditions::find_condition(&status.conditions, conditions::READY).expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Unschedulable")
    );
    assert!(
        ready
            .message
            .contains(&format!("orders-1: Unschedulable: {message}")),
        "{}",
        ready.message
    );

    // A failure says more: its category stays the reason.
    let mut failed = input(None, &reports, at(5));
    failed.pods = &pods;
    failed.failure = Some((crate::error::ErrorCategory::ApiError, "500".into()));
    let status = compose(&failed);
    let ready = conditions::find_condition(&status.conditions, conditions::READY).expect("Ready");
    assert_eq!(ready.reason, "ApiError");
}

#[test]
fn a_pod_no_scheduler_looked_at_is_not_scheduled_yet() {
    let reports = BTreeMap::new();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orders-1", "creationTimestamp": "1970-01-01T00:00:01Z"},
        "status": {"phase": "Pending"}
    }))
    .expect("pod");
    let pods = [pod];
    let mut early = input(None, &reports, at(5));
    early.pods = &pods;
    assert_eq!(compose(&early).instances[0].unscheduled, None);
    let mut later = input(None, &reports, at(61));
    later.pods = &pods;
    let status = compose(&later);
    let ready = conditions::find_condition(&status.conditions, conditions::READY).expect("Ready");
    assert_eq!(ready.reason, "NotScheduledYet");
    assert!(
        ready
            .message
            .contains("orders-1: NotScheduledYet: not scheduled yet"),
        "{}",
        ready.message
    );
}
