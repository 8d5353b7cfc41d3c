use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tusk_api::conditions::ConditionStatus;
use tusk_api::upgrade::{Outcome, Step};
use tusk_api::v1alpha1::UpgradeStatus;

use super::*;

fn now() -> Timestamp {
    "2026-12-05T12:00:00Z".parse().expect("a time")
}

fn hours_ago(hours: i64) -> Timestamp {
    now() - SignedDuration::from_hours(hours)
}

/// A serving 3-instance cluster of 15 declared at 16, backed up an hour
/// ago to a repository it cannot restore from (no pre-check).
fn input() -> UpgradeInput<'static> {
    UpgradeInput {
        running: 15,
        declared: 16,
        recorded: None,
        generation: Some(4),
        paused: false,
        primary: "orders-1",
        primary_serving: true,
        primary_major: Some(15),
        pods: &[],
        replica_volumes: &[],
        pod: None,
        check: None,
        restorable: false,
        last_backup: Some(hours_ago(1)),
        backup_max_age_hours: 24,
        backup_override: None,
        now: now(),
    }
}

fn at(step: &str) -> UpgradeStatus {
    UpgradeStatus {
        from_version: 15,
        to_version: 16,
        step: step.to_owned(),
        started_at: Some(tusk_api::time::kube_time(hours_ago(0))),
        message: None,
        steps: Vec::new(),
        primary: Some("orders-1".to_owned()),
        backup_override: None,
        generation: Some(4),
    }
}

fn finished(outcome: &Outcome) -> Observed {
    Observed::Finished {
        exit_code: Some(i32::from(outcome.failed_step.is_some())),
        message: Some(outcome.to_message()),
        at: now(),
    }
}

fn outcome(failed_step: Option<Step>) -> Outcome {
    Outcome {
        from_version: Some(15),
        data_version: Some(if failed_step.is_some() { 15 } else { 16 }),
        failed_step,
        message: "pg_upgrade: tables with regproc columns: public.t".to_owned(),
        duration_seconds: 3.2,
    }
}

const PODS: [String; 0] = [];

#[test]
fn a_declared_newer_major_with_nothing_to_restore_for_a_pre_check_stops_every_instance_first() {
    let pods = ["orders-1".to_owned(), "orders-2".to_owned()];
    let plan = decide(&UpgradeInput {
        pods: &pods,
        ..input()
    });
    assert_eq!(plan.action, Action::StopInstances);
    assert!(plan.holds_instances);
    let record = plan.record.expect("a record");
    assert_eq!(record.step, STOPPING_INSTANCES);
    assert_eq!(record.primary.as_deref(), Some("orders-1"));
    assert_eq!(record.backup_override, None);
    assert_eq!(record.steps.len(), 1);
    let message = record.message.unwrap_or_default();
    assert!(message.contains("no backup to restore"), "{message}");
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == "MajorUpgradeStarted")
    );
}

#[test]
fn without_a_recent_backup_nothing_stops_and_the_condition_names_the_field_and_the_override() {
    for last_backup in [None, Some(hours_ago(30))] {
        let plan = decide(&UpgradeInput {
            last_backup,
            ..input()
        });
        assert_eq!(plan.action, Action::None);
        assert!(!plan.holds_instances);
        assert_eq!(
            plan.record.as_ref().map(|r| r.step.as_str()),
            Some(WAITING_FOR_BACKUP)
        );
        let (status, reason, message) = plan.condition.expect("a condition");
        assert_eq!((status, reason), (ConditionStatus::False, "NoRecentBackup"));
        assert!(
            message.contains("spec.upgrade.backupMaxAgeHours"),
            "{message}"
        );
        assert!(
            message.contains(tusk_api::labels::UPGRADE_WITHOUT_BACKUP),
            "{message}"
        );
    }
}

#[test]
fn an_override_naming_another_version_approves_nothing_and_the_right_one_is_recorded() {
    let stale = decide(&UpgradeInput {
        last_backup: None,
        backup_override: Some("17"),
        ..input()
    });
    assert_eq!(stale.action, Action::None);
    let waiting = at(WAITING_FOR_BACKUP);
    let plan = decide(&UpgradeInput {
        last_backup: None,
        backup_override: Some("16"),
        recorded: Some(&waiting),
        ..input()
    });
    assert_eq!(plan.action, Action::StopInstances);
    let record = plan.record.expect("a record");
    assert!(record.backup_override.is_some());
    // A fresh record: the wait before the start is not one of its steps.
    assert_eq!(record.steps.len(), 1);
}

#[test]
fn an_upgrade_never_starts_while_the_primary_does_not_serve_or_the_cluster_is_paused() {
    let down = decide(&UpgradeInput {
        primary_serving: false,
        ..input()
    });
    assert_eq!((down.action, down.holds_instances), (Action::None, false));
    let paused = decide(&UpgradeInput {
        paused: true,
        ..input()
    });
    assert_eq!(paused, UpgradePlan::default());
}

#[test]
fn once_every_pod_is_gone_the_upgrade_pod_runs_and_a_restart_of_the_operator_resumes_there() {
    let stopping = at(STOPPING_INSTANCES);
    let pods = ["orders-2".to_owned()];
    let waiting = decide(&UpgradeInput {
        recorded: Some(&stopping),
        pods: &pods,
        ..input()
    });
    assert_eq!(waiting.action, Action::StopInstances);
    let stopped = decide(&UpgradeInput {
        recorded: Some(&stopping),
        pods: &PODS,
        ..input()
    });
    assert_eq!(stopped.action, Action::CreatePod);
    assert_eq!(
        stopped.record.as_ref().map(|r| r.step.as_str()),
        Some(UPGRADING)
    );
    // The record says Upgrading but the pod was never made (the operator
    // stopped between the status write and the creation).
    let upgrading = at(UPGRADING);
    let resumed = decide(&UpgradeInput {
        recorded: Some(&upgrading),
        ..input()
    });
    assert_eq!(resumed.action, Action::CreatePod);
    assert!(resumed.holds_instances);
    let running = Observed::Running { since: now() };
    let polled = decide(&UpgradeInput {
        recorded: Some(&upgrading),
        pod: Some(&running),
        ..input()
    });
    assert_eq!(polled.action, Action::None);
    // The pod is not watched: its end is looked for twice a second.
    assert!(polled.holds_instances);
    assert!(
        polled
            .look_again
            .is_some_and(|d| d <= std::time::Duration::from_millis(500))
    );
}

#[test]
fn a_linked_volume_records_the_new_major_then_the_primary_starts_then_replicas_are_recloned() {
    let upgrading = at(UPGRADING);
    let pod = finished(&outcome(None));
    let linked = decide(&UpgradeInput {
        recorded: Some(&upgrading),
        pod: Some(&pod),
        ..input()
    });
    assert_eq!(linked.data_version, Some(16));
    assert_eq!(linked.action, Action::RemovePod);
    let starting = linked.record.expect("a record");
    assert_eq!(starting.step, STARTING_PRIMARY);

    let start = decide(&UpgradeInput {
        recorded: Some(&starting),
        running: 16,
        primary_major: None,
        ..input()
    });
    assert_eq!(start.action, Action::StartPrimary);

    let replicas = ["orders-2".to_owned(), "orders-3".to_owned()];
    let served = decide(&UpgradeInput {
        recorded: Some(&starting),
        running: 16,
        primary_major: Some(16),
        replica_volumes: &replicas,
        ..input()
    });
    assert_eq!(served.action, Action::RemoveReplicaVolumes);
    let recloning = served.record.expect("a record");
    assert_eq!(recloning.step, RECLONING_REPLICAS);

    let done = decide(&UpgradeInput {
        recorded: Some(&recloning),
        running: 16,
        primary_major: Some(16),
        ..input()
    });
    assert!(!done.holds_instances);
    let completed = done.record.expect("a record");
    assert_eq!(completed.step, COMPLETED);
    let steps: Vec<&str> = completed.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(steps, [STARTING_PRIMARY, RECLONING_REPLICAS, COMPLETED]);
    assert_eq!(done.condition.map(|c| c.0), Some(ConditionStatus::True));
}

#[test]
fn a_failed_check_rolls_back_to_the_old_major_and_is_not_tried_again_until_the_spec_changes() {
    let upgrading = at(UPGRADING);
    let pod = finished(&outcome(Some(Step::Check)));
    let plan = decide(&UpgradeInput {
        recorded: Some(&upgrading),
        pod: Some(&pod),
        ..input()
    });
    assert_eq!(plan.data_version, None);
    assert_eq!(plan.action, Action::RemovePod);
    let failed = plan.record.expect("a record");
    assert_eq!(failed.step, FAILED);
    let message = failed.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("check failed: pg_upgrade: tables with regproc"),
        "{message}"
    );
    assert!(
        message.contains("starts again with PostgreSQL 15"),
        "{message}"
    );
    assert!(plan.events.iter().any(|e| e.reason == "MajorUpgradeFailed"));

    // While its pod is still there, nothing else runs on the volume.
    let removing = Observed::Removing;
    let held = decide(&UpgradeInput {
        recorded: Some(&failed),
        pod: Some(&removing),
        ..input()
    });
    assert!(held.holds_instances);
    // Then the primary first, with 15, before failover may judge it.
    let restarting = decide(&UpgradeInput {
        recorded: Some(&failed),
        primary_major: None,
        ..input()
    });
    assert_eq!(restarting.action, Action::StartPrimary);
    assert!(restarting.holds_instances);
    // Then the instances run 15 again, and the same spec does not retry.
    let after = decide(&UpgradeInput {
        recorded: Some(&failed),
        ..input()
    });
    assert_eq!(
        (after.action.clone(), after.holds_instances),
        (Action::None, false)
    );
    assert_eq!(after.condition.map(|c| c.1), Some("Failed"));
    let changed = decide(&UpgradeInput {
        recorded: Some(&failed),
        generation: Some(5),
        ..input()
    });
    assert_eq!(changed.action, Action::StopInstances);
}

#[test]
fn a_pod_that_ends_without_an_outcome_fails_the_upgrade_saying_how_it_ended() {
    let upgrading = at(UPGRADING);
    let pod = Observed::Finished {
        exit_code: Some(137),
        message: Some("OOMKilled".to_owned()),
        at: now(),
    };
    let plan = decide(&UpgradeInput {
        recorded: Some(&upgrading),
        pod: Some(&pod),
        ..input()
    });
    let message = plan.record.and_then(|r| r.message).unwrap_or_default();
    assert!(
        message.contains("exited with code 137") && message.contains("OOMKilled"),
        "{message}"
    );
}

#[test]
fn a_completed_upgrade_says_so_while_the_data_runs_that_major() {
    let completed = at(COMPLETED);
    let plan = decide(&UpgradeInput {
        recorded: Some(&completed),
        running: 16,
        ..input()
    });
    assert_eq!(plan.action, Action::None);
    assert_eq!(plan.record, None);
    assert_eq!(plan.condition.map(|c| c.1), Some("Completed"));
    assert!(!under_way(Some(&completed)));
    assert!(under_way(Some(&at(UPGRADING))));
}

/// `input()` with a repository the newest backup can be restored from.
fn restorable() -> UpgradeInput<'static> {
    UpgradeInput {
        restorable: true,
        ..input()
    }
}

fn pre_checking() -> UpgradeStatus {
    UpgradeStatus {
        primary: None,
        ..at(PRE_CHECKING)
    }
}

fn check_outcome(failed_step: Option<Step>, message: &str) -> Outcome {
    Outcome {
        from_version: Some(15),
        data_version: None,
        failed_step,
        message: message.to_owned(),
        duration_seconds: 4.5,
    }
}

#[test]
fn with_a_backup_to_restore_the_upgrade_pre_checks_first_and_stops_nothing() {
    let pods = ["orders-1".to_owned(), "orders-2".to_owned()];
    let plan = decide(&UpgradeInput {
        pods: &pods,
        ..restorable()
    });
    assert_eq!(plan.action, Action::None, "nothing stops yet");
    assert_eq!(plan.check, CheckAction::Create);
    assert!(!plan.holds_instances && !plan.under_way);
    let record = plan.record.expect("a record");
    assert_eq!(record.step, PRE_CHECKING);
    assert_eq!(record.primary, None, "chosen when the instances stop");
    let (status, reason, _) = plan.condition.expect("a condition");
    assert_eq!((status, reason), (ConditionStatus::Unknown, "PreChecking"));
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == "MajorUpgradePreChecking")
    );
    // The override without any backup has nothing to restore: no pre-check.
    let plan = decide(&UpgradeInput {
        last_backup: None,
        backup_override: Some("16"),
        pods: &pods,
        ..restorable()
    });
    assert_eq!(plan.action, Action::StopInstances);
    assert_eq!(plan.check, CheckAction::None);
}

#[test]
fn a_pre_check_under_way_is_awaited_and_created_again_when_its_pod_is_missing() {
    let record = pre_checking();
    let running = Observed::Running { since: now() };
    let plan = decide(&UpgradeInput {
        recorded: Some(&record),
        check: Some(&running),
        ..restorable()
    });
    assert_eq!((plan.action, plan.check), (Action::None, CheckAction::None));
    assert!(plan.look_again.is_some() && !plan.holds_instances);
    for missing in [None, Some(&Observed::Orphaned)] {
        let plan = decide(&UpgradeInput {
            recorded: Some(&record),
            check: missing,
            ..restorable()
        });
        assert_eq!(plan.check, CheckAction::Create);
    }
    let stuck = Observed::Running {
        since: hours_ago(7),
    };
    let plan = decide(&UpgradeInput {
        recorded: Some(&record),
        check: Some(&stuck),
        ..restorable()
    });
    assert_eq!(plan.record.map(|r| r.step).as_deref(), Some(FAILED));
    assert_eq!(plan.check, CheckAction::Remove);
}

#[test]
fn a_passed_pre_check_stops_the_instances_once_the_primary_serves() {
    let record = pre_checking();
    let passed = finished(&check_outcome(None, "pg_upgrade --check passed"));
    let pods = ["orders-1".to_owned()];
    let waiting = decide(&UpgradeInput {
        recorded: Some(&record),
        check: Some(&passed),
        primary_serving: false,
        pods: &pods,
        ..restorable()
    });
    assert_eq!(waiting.action, Action::None);
    assert_eq!(waiting.check, CheckAction::None, "its outcome is kept");
    assert_eq!(waiting.record, None);
    let plan = decide(&UpgradeInput {
        recorded: Some(&record),
        check: Some(&passed),
        pods: &pods,
        ..restorable()
    });
    assert_eq!(plan.action, Action::StopInstances);
    assert_eq!(plan.check, CheckAction::Remove);
    assert!(plan.holds_instances && plan.under_way);
    let record = plan.record.expect("a record");
    assert_eq!(record.step, STOPPING_INSTANCES);
    assert_eq!(record.primary.as_deref(), Some("orders-1"));
    let message = record.message.unwrap_or_default();
    assert!(message.contains("pg_upgrade --check passed"), "{message}");
}

#[test]
fn a_failed_pre_check_fails_the_upgrade_with_every_instance_serving() {
    let record = pre_checking();
    let failed = finished(&check_outcome(
        Some(Step::Check),
        "pg_upgrade failed: could not load library \"$libdir/citext\"",
    ));
    let pods = ["orders-1".to_owned()];
    let plan = decide(&UpgradeInput {
        recorded: Some(&record),
        check: Some(&failed),
        pods: &pods,
        ..restorable()
    });
    assert_eq!(plan.action, Action::None, "nothing to stop or start");
    assert_eq!(plan.check, CheckAction::Remove);
    assert!(!plan.holds_instances && !plan.under_way);
    let record = plan.record.expect("a record");
    assert_eq!(record.step, FAILED);
    let (status, reason, message) = plan.condition.expect("a condition");
    assert_eq!((status, reason), (ConditionStatus::False, "Failed"));
    assert!(
        message.contains("check failed") && message.contains("citext"),
        "{message}"
    );
    assert!(message.contains("nothing was stopped"), "{message}");
    // Next pass: the pod still going away is removed, nothing is tried
    // again until the spec changes.
    let removing = Observed::Removing;
    let again = decide(&UpgradeInput {
        recorded: Some(&record),
        check: Some(&removing),
        pods: &pods,
        ..restorable()
    });
    assert_eq!(
        (again.action, again.check),
        (Action::None, CheckAction::Remove)
    );
    assert!(again.record.is_none());
    let changed = decide(&UpgradeInput {
        recorded: Some(&record),
        generation: Some(5),
        pods: &pods,
        ..restorable()
    });
    assert_eq!(
        changed.check,
        CheckAction::Create,
        "a new spec is checked again"
    );
}

#[test]
fn a_pre_check_whose_version_is_no_longer_declared_is_abandoned_and_removed() {
    let record = pre_checking();
    let running = Observed::Running { since: now() };
    let plan = decide(&UpgradeInput {
        declared: 15,
        recorded: Some(&record),
        check: Some(&running),
        ..restorable()
    });
    assert_eq!(plan.check, CheckAction::Remove);
    let record = plan.record.expect("a record");
    assert_eq!(record.step, FAILED);
    assert!(record.message.unwrap_or_default().contains("abandoned"));
}

#[test]
fn an_earlier_pre_checks_pod_is_removed_before_a_new_check_starts() {
    // 16 was being checked; 17 is declared now.
    let record = pre_checking();
    let passed = finished(&check_outcome(None, "pg_upgrade --check passed"));
    let plan = decide(&UpgradeInput {
        declared: 17,
        recorded: Some(&record),
        check: Some(&passed),
        ..restorable()
    });
    assert_eq!(plan.check, CheckAction::Remove, "its outcome is 16's");
    assert_eq!((plan.action, plan.record), (Action::None, None));
    let plan = decide(&UpgradeInput {
        declared: 17,
        recorded: Some(&record),
        ..restorable()
    });
    assert_eq!(plan.check, CheckAction::Create);
    assert_eq!(plan.record.map(|r| r.to_version), Some(17));
}
