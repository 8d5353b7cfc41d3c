//! Building the `/status` report from the manager's state and what
//! PostgreSQL says.

use std::time::Duration;

use tusk_api::instance::{ArchivingReport, InstancePhase, InstanceReport, InstanceRole};

use crate::context::InstanceContext;
use crate::observe::{self, ArchiverStats, Observation};
use crate::sql;
use crate::state::{ArchivingState, ManagerState};

/// How long one status query may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// Observes the local PostgreSQL, if it runs and answers in time.
pub async fn observe_local(ctx: &InstanceContext) -> Option<Observation> {
    let work = async {
        let client = sql::connect(&ctx.local_target(), "postgres").await.ok()?;
        observe::observe(&client).await.ok()
    };
    tokio::time::timeout(QUERY_TIMEOUT, work)
        .await
        .ok()
        .flatten()
}

/// The report for `state` and `observation`.
pub fn build(
    name: &str,
    state: &ManagerState,
    observation: Option<&Observation>,
) -> InstanceReport {
    let running = state.postmaster_pid.is_some();
    let observed = observation.filter(|_| running);
    let role = match observed {
        Some(o) if o.in_recovery => InstanceRole::Replica,
        Some(_) => InstanceRole::Primary,
        None => InstanceRole::Stopped,
    };
    let ready = state.phase == InstancePhase::Running
        && observed.is_some_and(|o| !o.in_recovery || o.streaming);
    let standby = observed.filter(|o| o.in_recovery);
    InstanceReport {
        name: name.to_owned(),
        role,
        phase: state.phase,
        ready,
        fenced: state.fenced,
        target_primary: state.target_primary.clone(),
        postgres_version: observed.map(|o| o.version.clone()),
        system_identifier: observed.map(|o| o.system_identifier.clone()),
        timeline: observed.and_then(|o| o.timeline),
        current_lsn: observed.and_then(|o| o.current_lsn).map(|l| l.to_string()),
        received_lsn: standby.and_then(|o| o.received_lsn).map(|l| l.to_string()),
        replayed_lsn: standby.and_then(|o| o.replayed_lsn).map(|l| l.to_string()),
        lag_bytes: standby.and_then(Observation::lag_bytes),
        lag_seconds: standby.and_then(|o| o.lag_seconds),
        replayed_commit_time: standby.and_then(|o| o.replayed_commit_time.clone()),
        streaming: standby.map(|o| o.streaming),
        upstream: standby.and_then(|o| o.upstream.clone()),
        pending_restart: observed
            .map(|o| o.pending_restart.clone())
            .unwrap_or_default(),
        held_minimums: Vec::new(),
        pending_restart_lowered: observed
            .map(|o| o.pending_restart_lowered.clone())
            .unwrap_or_default(),
        standbys: observed.map(|o| o.standbys.clone()).unwrap_or_default(),
        crash_count: state.crash_count,
        last_error: state.last_error.clone(),
        desired_state_errors: state.desired_state_errors.clone(),
        kept_copy: None,
        kept_wal: None,
        archiving: state
            .archiving
            .as_ref()
            .map(|a| archiving(a, observed.and_then(|o| o.archiver.as_ref()))),
        api_server_reachable: state.api_server_reachable,
        backup: state.backup.clone(),
        backup_server: state.backup_server.clone(),
        roles: state.roles.clone(),
    }
}

/// The archiving report from the manager's stanza and the archiver's
/// statistics; pgBackRest's message for a failing push is added by the
/// caller (it reads files).
fn archiving(state: &ArchivingState, archiver: Option<&ArchiverStats>) -> ArchivingReport {
    let mut report = ArchivingReport {
        stanza: state.stanza.clone(),
        stanza_created: state.stanza_created,
        failing: state.stanza_error.is_some(),
        message: state.stanza_error.clone(),
        ..ArchivingReport::default()
    };
    if let Some(stats) = archiver {
        report.failing |= stats.failing;
        report.archived_count = stats.archived_count;
        report
            .last_archived_wal
            .clone_from(&stats.last_archived_wal);
        report
            .last_archived_time
            .clone_from(&stats.last_archived_time);
        report.failed_count = stats.failed_count;
        report.last_failed_wal.clone_from(&stats.last_failed_wal);
        report.last_failed_time.clone_from(&stats.last_failed_time);
        report.pending_segments = Some(stats.pending_segments);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::lsn::Lsn;

    fn running() -> ManagerState {
        ManagerState {
            phase: InstancePhase::Running,
            postmaster_pid: Some(42),
            ..ManagerState::default()
        }
    }

    fn standby(streaming: bool) -> Observation {
        Observation {
            in_recovery: true,
            received_lsn: Some(Lsn(0x3000)),
            replayed_lsn: Some(Lsn(0x2000)),
            streaming,
            ..Observation::default()
        }
    }

    #[test]
    fn a_standby_is_ready_only_while_streaming() {
        let report = build("db-2", &running(), Some(&standby(true)));
        assert_eq!(report.role, InstanceRole::Replica);
        assert!(report.ready);
        assert_eq!(report.lag_bytes, Some(0x1000));
        assert!(!build("db-2", &running(), Some(&standby(false))).ready);
    }

    #[test]
    fn a_primary_is_ready_when_it_answers() {
        let primary = Observation {
            current_lsn: Some(Lsn(0x5000)),
            ..Observation::default()
        };
        let report = build("db-1", &running(), Some(&primary));
        assert_eq!(report.role, InstanceRole::Primary);
        assert!(report.ready);
        assert_eq!(report.current_lsn.as_deref(), Some("0/5000"));
        assert_eq!(report.lag_bytes, None);
    }

    #[test]
    fn a_stopped_or_fenced_instance_is_not_ready() {
        let fenced = ManagerState {
            phase: InstancePhase::Fenced,
            fenced: true,
            ..ManagerState::default()
        };
        let report = build("db-1", &fenced, Some(&standby(true)));
        assert_eq!(report.role, InstanceRole::Stopped);
        assert!(!report.ready);
        assert!(report.fenced);
    }

    #[test]
    fn archiving_fails_while_the_stanza_cannot_be_created_or_the_last_push_failed() {
        let mut state = running();
        state.archiving = Some(ArchivingState {
            stanza: "db".into(),
            stanza_created: false,
            stanza_error: Some("HTTP request failed with 403".into()),
        });
        let primary = Observation {
            archiver: Some(ArchiverStats::default()),
            ..Observation::default()
        };
        let report = build("db-1", &state, Some(&primary));
        let archiving = report.archiving.expect("archiving");
        assert!(archiving.failing);
        assert_eq!(
            archiving.message.as_deref(),
            Some("HTTP request failed with 403")
        );

        state.archiving = Some(ArchivingState {
            stanza: "db".into(),
            stanza_created: true,
            stanza_error: None,
        });
        let failing_push = Observation {
            archiver: Some(ArchiverStats {
                archived_count: 3,
                last_archived_wal: Some("000000010000000000000003".into()),
                failed_count: 1,
                last_failed_wal: Some("000000010000000000000004".into()),
                failing: true,
                pending_segments: 2,
                ..ArchiverStats::default()
            }),
            ..Observation::default()
        };
        let archiving = build("db-1", &state, Some(&failing_push))
            .archiving
            .expect("archiving");
        assert!(archiving.failing);
        assert_eq!(archiving.pending_segments, Some(2));
        assert_eq!(
            archiving.last_failed_wal.as_deref(),
            Some("000000010000000000000004")
        );
        // Not archiving: no report at all.
        assert_eq!(build("db-1", &running(), Some(&primary)).archiving, None);
    }

    #[test]
    fn an_unreadable_declaration_is_reported_on_status() {
        let problem = "annotation tusk.dev/fenced-instances is not a JSON list".to_owned();
        let state = ManagerState {
            phase: InstancePhase::Fenced,
            fenced: true,
            desired_state_errors: vec![problem.clone()],
            ..ManagerState::default()
        };
        let report = build("db-1", &state, None);
        assert_eq!(report.desired_state_errors, vec![problem]);
        let json = serde_json::to_value(&report).expect("serialises");
        assert_eq!(
            json["desiredStateErrors"][0],
            report.desired_state_errors[0]
        );
    }
}
