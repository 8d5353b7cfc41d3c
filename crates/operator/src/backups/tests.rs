use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tusk_api::instance::{BackupReport, InstanceReport};
use tusk_api::v1alpha1::{
    BackupAssignment, BackupPhase, BackupServer, BackupTarget, BackupType, PostgresBackup,
    PostgresBackupSpec, PostgresBackupStatus,
};

use super::*;

fn time(text: &str) -> Time {
    Time(text.parse::<Timestamp>().expect("a time"))
}

fn backup(name: &str, created: &str, phase: Option<BackupPhase>) -> PostgresBackup {
    let mut backup = PostgresBackup::new(
        name,
        PostgresBackupSpec {
            cluster: "db".into(),
            target: Default::default(),
            backup_type: BackupType::Full,
        },
    );
    backup.metadata.creation_timestamp = Some(time(created));
    backup.status = phase.map(|phase| PostgresBackupStatus {
        phase: Some(phase),
        ..PostgresBackupStatus::default()
    });
    backup
}

fn assignment(name: &str) -> BackupAssignment {
    BackupAssignment {
        backup: name.into(),
        instance: "db-1".into(),
        backup_type: BackupType::Full,
        primary_server: None,
    }
}

fn reporting(status: PostgresBackupStatus, name: &str) -> BTreeMap<String, InstanceReport> {
    let mut report: InstanceReport = serde_json::from_value(serde_json::json!({
        "name": "db-1", "role": "primary", "phase": "running", "ready": true, "fenced": false,
    }))
    .expect("a report");
    report.backup = Some(BackupReport {
        name: name.into(),
        status,
    });
    BTreeMap::from([("db-1".to_owned(), report)])
}

struct Case {
    unable: Option<String>,
    running: Option<BackupAssignment>,
    backups: Vec<PostgresBackup>,
    reports: BTreeMap<String, InstanceReport>,
    pods: Vec<String>,
    primary: Option<&'static str>,
}

impl Case {
    fn new(backups: Vec<PostgresBackup>) -> Self {
        Case {
            unable: None,
            running: None,
            backups,
            reports: BTreeMap::new(),
            pods: vec!["db-1".into(), "db-2".into()],
            primary: Some("db-1"),
        }
    }

    fn decide(&self) -> BackupPlan {
        decide(&BackupInput {
            unable: self.unable.clone(),
            running: self.running.as_ref(),
            backups: &self.backups,
            reports: &self.reports,
            pods: &self.pods,
            primary: self.primary,
            now: &time("2026-12-04T12:00:00Z"),
        })
    }
}

fn phases(plan: &BackupPlan) -> Vec<(&str, Option<BackupPhase>)> {
    plan.records
        .iter()
        .map(|(name, status)| (name.as_str(), status.phase))
        .collect()
}

#[test]
fn the_oldest_waiting_backup_goes_to_the_serving_primary_and_the_others_wait() {
    let plan = Case::new(vec![
        backup("later", "2026-12-04T11:00:00Z", None),
        backup("first", "2026-12-04T10:00:00Z", None),
    ])
    .decide();
    assert_eq!(plan.running, Some(assignment("first")));
    assert_eq!(
        phases(&plan),
        [
            ("first", Some(BackupPhase::Running)),
            ("later", Some(BackupPhase::Pending))
        ]
    );
    assert_eq!(plan.records[0].1.instance.as_deref(), Some("db-1"));
    assert_eq!(plan.events[0].reason, "BackupStarted");
}

#[test]
fn without_a_serving_primary_a_backup_waits_pending_and_is_written_once() {
    let mut case = Case::new(vec![backup("b", "2026-12-04T10:00:00Z", None)]);
    case.primary = None;
    let plan = case.decide();
    assert_eq!(plan.running, None);
    assert_eq!(phases(&plan), [("b", Some(BackupPhase::Pending))]);
    case.backups = vec![backup(
        "b",
        "2026-12-04T10:00:00Z",
        Some(BackupPhase::Pending),
    )];
    assert_eq!(case.decide(), BackupPlan::default(), "no second write");
}

#[test]
fn a_cluster_that_cannot_back_up_fails_its_backups_saying_why() {
    let mut case = Case::new(vec![backup("b", "2026-12-04T10:00:00Z", None)]);
    case.unable = Some("spec.backup is not set".into());
    let plan = case.decide();
    assert_eq!(plan.running, None);
    assert_eq!(phases(&plan), [("b", Some(BackupPhase::Failed))]);
    let error = plan.records[0].1.error.clone().unwrap_or_default();
    assert!(error.contains("spec.backup is not set"), "{error}");
    assert!(plan.events[0].warning);
}

#[test]
fn a_completed_report_is_recorded_and_the_next_backup_assigned() {
    let mut case = Case::new(vec![
        backup("first", "2026-12-04T10:00:00Z", Some(BackupPhase::Running)),
        backup("second", "2026-12-04T11:00:00Z", Some(BackupPhase::Pending)),
    ]);
    case.running = Some(assignment("first"));
    let done = PostgresBackupStatus {
        phase: Some(BackupPhase::Completed),
        backup_id: Some("20261204-100000F".into()),
        completed_at: Some(time("2026-12-04T11:30:00Z")),
        ..PostgresBackupStatus::default()
    };
    case.reports = reporting(done.clone(), "first");
    let plan = case.decide();
    assert_eq!(plan.records[0], ("first".to_owned(), done));
    assert_eq!(
        plan.completed,
        Some(("20261204-100000F".to_owned(), time("2026-12-04T11:30:00Z")))
    );
    assert_eq!(plan.running, Some(assignment("second")));
    assert_eq!(plan.events[0].reason, "BackupCompleted");
}

#[test]
fn a_failed_report_is_recorded_with_its_error() {
    let mut case = Case::new(vec![backup(
        "b",
        "2026-12-04T10:00:00Z",
        Some(BackupPhase::Running),
    )]);
    case.running = Some(assignment("b"));
    let failure = PostgresBackupStatus {
        phase: Some(BackupPhase::Failed),
        error: Some("ERROR: [039]: HTTP request failed".into()),
        ..PostgresBackupStatus::default()
    };
    case.reports = reporting(failure, "b");
    let plan = case.decide();
    assert_eq!(plan.running, None);
    assert_eq!(plan.completed, None);
    assert_eq!(phases(&plan), [("b", Some(BackupPhase::Failed))]);
    assert!(plan.events[0].warning && plan.events[0].text.contains("[039]"));
}

#[test]
fn a_running_backup_waits_for_a_silent_instance_but_fails_when_its_pod_is_gone() {
    let mut case = Case::new(vec![backup(
        "b",
        "2026-12-04T10:00:00Z",
        Some(BackupPhase::Running),
    )]);
    case.running = Some(assignment("b"));
    let plan = case.decide();
    assert_eq!(plan.running, Some(assignment("b")));
    assert!(plan.records.is_empty());

    case.pods = vec!["db-2".into()];
    let plan = case.decide();
    assert_eq!(plan.running, None);
    assert_eq!(phases(&plan), [("b", Some(BackupPhase::Failed))]);
    assert!(
        plan.records[0]
            .1
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("db-1 went away"),
        "{plan:?}"
    );
}

#[test]
fn progress_is_copied_once_and_finished_backups_are_never_touched() {
    let mut case = Case::new(vec![
        backup("old", "2026-12-04T09:00:00Z", Some(BackupPhase::Completed)),
        backup("b", "2026-12-04T10:00:00Z", Some(BackupPhase::Running)),
    ]);
    case.running = Some(assignment("b"));
    let progress = PostgresBackupStatus {
        phase: Some(BackupPhase::Running),
        started_at: Some(time("2026-12-04T10:00:05Z")),
        instance: Some("db-1".into()),
        ..PostgresBackupStatus::default()
    };
    case.reports = reporting(progress.clone(), "b");
    let plan = case.decide();
    assert_eq!(plan.records, [("b".to_owned(), progress.clone())]);
    case.backups[1].status = Some(progress);
    let plan = case.decide();
    assert!(plan.records.is_empty(), "{plan:?}");
    assert_eq!(plan.running, Some(assignment("b")));
}

#[test]
fn the_newest_backup_is_recent_within_twice_the_schedules_period() {
    use tusk_api::conditions::ConditionStatus;
    let daily = schedule::parse("0 3 * * *").expect("valid");
    let at = |text: &str| -> k8s_openapi::jiff::Timestamp { text.parse().expect("a time") };
    let now = at("2026-12-04T12:00:00Z");
    let judged = |newest, declared: &str| {
        let (state, reason, _) = freshness(&daily, newest, at(declared), now);
        (state, reason)
    };
    assert_eq!(
        judged(None, "2026-12-04T10:00:00Z"),
        (ConditionStatus::Unknown, "NoBackupYet")
    );
    assert_eq!(
        judged(None, "2026-12-01T00:00:00Z"),
        (ConditionStatus::False, "NoBackup")
    );
    let recent = Some(("20261204-030000F", at("2026-12-04T03:05:00Z")));
    assert_eq!(
        judged(recent, "2026-12-01T00:00:00Z"),
        (ConditionStatus::True, "BackupRecent")
    );
    // Two days and more: two daily slots went by without a backup.
    let stale = Some(("20261201-030000F", at("2026-12-01T03:05:00Z")));
    assert_eq!(
        judged(stale, "2026-12-01T00:00:00Z"),
        (ConditionStatus::False, "BackupStale")
    );
}

fn server_of_db_1() -> BackupServer {
    BackupServer {
        address: "10.0.0.1:8432".into(),
        data_directory: "/var/lib/postgresql/data/pgdata".into(),
        socket_directory: "/run/tusk".into(),
        port: 5432,
    }
}

/// `db-1` the primary (running its backup server when `server`, its
/// stanza created), `db-2` a standby streaming when `streaming`.
fn primary_and_standby(server: bool, streaming: bool) -> BTreeMap<String, InstanceReport> {
    let report = |value: serde_json::Value| -> InstanceReport {
        serde_json::from_value(value).expect("a report")
    };
    let mut primary = report(serde_json::json!({
        "name": "db-1", "role": "primary", "phase": "running", "ready": true, "fenced": false,
        "archiving": {"stanza": "db", "stanzaCreated": true, "failing": false},
    }));
    primary.backup_server = server.then(server_of_db_1);
    let standby = report(serde_json::json!({
        "name": "db-2", "role": "replica", "phase": "running", "ready": true, "fenced": false,
        "streaming": streaming, "lagBytes": 0,
    }));
    BTreeMap::from([("db-1".to_owned(), primary), ("db-2".to_owned(), standby)])
}

#[test]
fn a_backup_preferring_a_replica_goes_to_a_streaming_standby_through_the_primarys_server() {
    let mut case = Case::new(vec![backup("b", "2026-12-04T10:00:00Z", None)]);
    case.reports = primary_and_standby(true, true);
    let plan = case.decide();
    assert_eq!(
        plan.running.as_ref().map(|r| r.instance.as_str()),
        Some("db-2")
    );
    assert_eq!(
        plan.running.as_ref().and_then(|r| r.primary_server.clone()),
        Some(server_of_db_1()),
        "the standby is told the primary's server"
    );
    assert_eq!(plan.records[0].1.instance.as_deref(), Some("db-2"));
    assert!(
        plan.events[0].text.contains("db-2 (a standby)"),
        "{:?}",
        plan.events
    );

    // Asked for the primary: the primary, standby or not.
    case.backups[0].spec.target = BackupTarget::Primary;
    let plan = case.decide();
    assert_eq!(
        plan.running.as_ref().map(|r| r.instance.as_str()),
        Some("db-1")
    );
}

#[test]
fn without_the_primarys_server_or_a_streaming_standby_the_primary_takes_the_backup() {
    for (server, streaming) in [(false, true), (true, false)] {
        let mut case = Case::new(vec![backup("b", "2026-12-04T10:00:00Z", None)]);
        case.reports = primary_and_standby(server, streaming);
        let plan = case.decide();
        assert_eq!(
            plan.running.as_ref().map(|r| r.instance.as_str()),
            Some("db-1"),
            "server {server}, streaming {streaming}"
        );
        assert!(
            plan.events[0].text.contains("db-1 (the primary)"),
            "{:?}",
            plan.events
        );
    }
    // Before the primary created the stanza (a new cluster's first
    // minute), which the standby's pgBackRest would not find.
    let mut case = Case::new(vec![backup("b", "2026-12-04T10:00:00Z", None)]);
    case.reports = primary_and_standby(true, true);
    if let Some(archiving) = case
        .reports
        .get_mut("db-1")
        .and_then(|r| r.archiving.as_mut())
    {
        archiving.stanza_created = false;
    }
    let plan = case.decide();
    assert_eq!(
        plan.running.as_ref().map(|r| r.instance.as_str()),
        Some("db-1")
    );
    // A standby whose pod is gone is not chosen.
    let mut case = Case::new(vec![backup("b", "2026-12-04T10:00:00Z", None)]);
    case.reports = primary_and_standby(true, true);
    case.pods = vec!["db-1".into()];
    let plan = case.decide();
    assert_eq!(
        plan.running.as_ref().map(|r| r.instance.as_str()),
        Some("db-1")
    );
}
