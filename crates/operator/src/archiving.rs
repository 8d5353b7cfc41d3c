//! Continuous WAL archiving as the cluster's status tells it: the
//! primary's report (`/status`, `archiving`) becomes `status.backup`'s
//! archiving fields and the `ContinuousArchiving` condition, and a change
//! to failing becomes a Warning event (R22). Pure: the status step feeds
//! it what it observed.
//!
//! The instance managers do the work (pgBackRest's configuration,
//! `archive_command`, the stanza); the operator only gives the pods the
//! repository's keys and CA (see `builders::pod`) and reports.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tusk_api::conditions::{self, ConditionStatus, DesiredCondition, set_condition};
use tusk_api::instance::{ArchivingReport, InstanceReport, InstanceRole};
use tusk_api::v1alpha1::{BackupStatus, PostgresClusterStatus};
use tusk_postgres::recovery_log::TARGET_PAST_ARCHIVE;

use crate::note::Note;

/// What the cluster archives to, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveTarget {
    /// `spec.backup.destination.url`.
    pub url: String,
    /// The Secret holding the repository's keys, if one is named.
    pub credentials_secret: Option<String>,
    /// The claim of the volume holding a `file://` repository.
    pub volume_claim: Option<String>,
}

/// Updates `status` from the primary's report. `target` is `None` when
/// the cluster does not archive WAL (the condition and the archiving
/// fields are removed). A primary that did not answer changes nothing:
/// the last observation stands.
pub fn apply(
    status: &mut PostgresClusterStatus,
    target: Option<&ArchiveTarget>,
    primary: Option<&InstanceReport>,
    generation: Option<i64>,
    now: &Time,
) {
    let Some(target) = target else {
        conditions::remove_condition(&mut status.conditions, conditions::CONTINUOUS_ARCHIVING);
        if let Some(backup) = status.backup.as_mut() {
            clear_failure(backup);
            backup.pending_wal_segments = None;
        }
        return;
    };
    let Some(report) = primary
        .filter(|r| r.role == InstanceRole::Primary)
        .and_then(|r| r.archiving.as_ref())
    else {
        return;
    };
    let backup = status.backup.get_or_insert_with(BackupStatus::default);
    if report.last_archived_wal.is_some() {
        backup
            .last_archived_wal
            .clone_from(&report.last_archived_wal);
        backup.last_archived_wal_time = time(report.last_archived_time.as_deref());
    }
    backup.pending_wal_segments = report.pending_segments;
    let (state, reason, message) = if report.failing {
        backup
            .last_failed_archive
            .clone_from(&report.last_failed_wal);
        backup.last_failed_archive_time = time(report.last_failed_time.as_deref());
        backup.archive_error.clone_from(&report.message);
        let reason = if report.stanza_created {
            "ArchivePushFailing"
        } else {
            "StanzaCreationFailing"
        };
        (
            ConditionStatus::False,
            reason,
            failing_message(target, report),
        )
    } else if report.stanza_created {
        clear_failure(backup);
        let message = match (&report.last_archived_wal, &report.last_archived_time) {
            (Some(wal), Some(at)) => {
                format!("WAL archived to {}; newest {wal} at {at}", target.url)
            }
            _ => format!("archiving WAL to {}; no segment finished yet", target.url),
        };
        (ConditionStatus::True, "Archiving", message)
    } else {
        (
            ConditionStatus::Unknown,
            "CreatingStanza",
            format!("creating the pgBackRest stanza in {}", target.url),
        )
    };
    let condition = DesiredCondition {
        type_: conditions::CONTINUOUS_ARCHIVING,
        status: state,
        reason,
        message: &message,
    };
    set_condition(&mut status.conditions, &condition, generation, now);
}

fn clear_failure(backup: &mut BackupStatus) {
    backup.last_failed_archive = None;
    backup.last_failed_archive_time = None;
    backup.archive_error = None;
}

/// Names what fails (the stanza or a segment), where, with which
/// credentials, pgBackRest's words, and the WAL kept meanwhile.
fn failing_message(target: &ArchiveTarget, report: &ArchivingReport) -> String {
    let what = match (&report.last_failed_wal, report.stanza_created) {
        (_, false) => "creating the pgBackRest stanza".to_owned(),
        (Some(wal), true) => format!("archiving {wal}"),
        (None, true) => "archiving WAL".to_owned(),
    };
    let mut message = format!("{what} in {} fails", target.url);
    if let Some(secret) = &target.credentials_secret {
        message.push_str(&format!(" (keys from Secret {secret})"));
    }
    if let Some(claim) = &target.volume_claim {
        message.push_str(&format!(" (on the volume of claim {claim})"));
    }
    if let Some(why) = &report.message {
        message.push_str(&format!(": {why}"));
    }
    if let Some(pending) = report.pending_segments.filter(|n| *n > 0) {
        message.push_str(&format!(
            "; {pending} WAL segment(s) kept on the primary's volume until archived"
        ));
    }
    message
}

fn time(text: Option<&str>) -> Option<Time> {
    tusk_api::time::parse_kube_time(text?)
}

/// A Warning when archiving starts failing, a Normal event when it
/// recovers.
pub fn notes(previous: Option<&PostgresClusterStatus>, new: &PostgresClusterStatus) -> Vec<Note> {
    let state = |status: Option<&PostgresClusterStatus>| {
        status?
            .conditions
            .iter()
            .find(|c| c.type_ == conditions::CONTINUOUS_ARCHIVING)
            .map(|c| (c.status.clone(), c.message.clone()))
    };
    let before = state(previous).map(|(s, _)| s);
    match state(Some(new)) {
        Some((now, message)) if now == "False" && before.as_deref() != Some("False") => {
            vec![Note::warning("ArchivingFailing", message)]
        }
        Some((now, message)) if now == "True" && before.as_deref() == Some("False") => {
            vec![Note::normal("ArchivingRecovered", message)]
        }
        _ => Vec::new(),
    }
}

/// A Warning when an instance first says that the recovery target of
/// `spec.bootstrap.recovery` lies past the archived WAL (its words, with
/// the newest archived time and what to do, are in the Ready condition's
/// message; see `tusk_postgres::recovery_log`).
pub fn recovery_notes(
    previous: Option<&PostgresClusterStatus>,
    new: &PostgresClusterStatus,
) -> Vec<Note> {
    let told = |status: Option<&PostgresClusterStatus>| {
        status?
            .conditions
            .iter()
            .find(|c| c.type_ == conditions::READY)
            .and_then(|c| {
                let at = c.message.find(TARGET_PAST_ARCHIVE)?;
                Some(
                    c.message[at..]
                        .split("; ")
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
    };
    match (told(previous), told(Some(new))) {
        (None, Some(message)) => vec![Note::warning("RecoveryTargetUnreached", message)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> ArchiveTarget {
        ArchiveTarget {
            url: "s3://backups/prod".into(),
            credentials_secret: Some("orders-s3".into()),
            volume_claim: None,
        }
    }

    fn primary(archiving: ArchivingReport) -> InstanceReport {
        let mut report: InstanceReport = serde_json::from_value(serde_json::json!({
            "name": "orders-1", "role": "primary", "phase": "running", "ready": true, "fenced": false,
        }))
        .expect("a minimal report");
        report.archiving = Some(archiving);
        report
    }

    fn now() -> Time {
        Time("2026-12-04T04:00:00Z".parse().expect("time"))
    }

    fn condition(status: &PostgresClusterStatus) -> (String, String, String) {
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == conditions::CONTINUOUS_ARCHIVING)
            .expect("the condition");
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    #[test]
    fn archived_wal_is_recorded_and_the_condition_is_true() {
        let mut status = PostgresClusterStatus::default();
        let report = primary(ArchivingReport {
            stanza: "orders".into(),
            stanza_created: true,
            last_archived_wal: Some("000000010000000000000005".into()),
            last_archived_time: Some("2026-12-04T03:59:58.123456Z".into()),
            archived_count: 5,
            pending_segments: Some(0),
            ..ArchivingReport::default()
        });
        apply(&mut status, Some(&target()), Some(&report), Some(3), &now());
        let backup = status.backup.clone().expect("backup status");
        assert_eq!(
            backup.last_archived_wal.as_deref(),
            Some("000000010000000000000005")
        );
        assert!(backup.last_archived_wal_time.is_some());
        assert_eq!(backup.last_failed_archive, None);
        let (state, reason, _) = condition(&status);
        assert_eq!((state.as_str(), reason.as_str()), ("True", "Archiving"));
        assert!(notes(None, &status).is_empty());
    }

    #[test]
    fn a_failure_names_the_call_the_secret_and_the_kept_wal_and_warns_once() {
        let mut status = PostgresClusterStatus::default();
        let report = primary(ArchivingReport {
            stanza: "orders".into(),
            stanza_created: false,
            failing: true,
            pending_segments: Some(3),
            message: Some("ERROR: [039]: HTTP request failed with 403 (FORBIDDEN) (HEAD /backups/prod/archive/orders/archive.info)".into()),
            ..ArchivingReport::default()
        });
        apply(&mut status, Some(&target()), Some(&report), Some(3), &now());
        let (state, reason, message) = condition(&status);
        assert_eq!(
            (state.as_str(), reason.as_str()),
            ("False", "StanzaCreationFailing")
        );
        for part in [
            "s3://backups/prod",
            "orders-s3",
            "403",
            "HEAD /backups/prod",
            "3 WAL segment",
        ] {
            assert!(message.contains(part), "{part} in {message}");
        }
        assert_eq!(
            status.backup.as_ref().and_then(|b| b.archive_error.clone()),
            report.archiving.as_ref().and_then(|a| a.message.clone())
        );
        let warned = notes(None, &status);
        assert_eq!(warned.len(), 1);
        assert!(warned[0].warning);
        // Still failing on the next pass: no second warning.
        let before = status.clone();
        apply(&mut status, Some(&target()), Some(&report), Some(3), &now());
        assert!(notes(Some(&before), &status).is_empty());

        // Recovered: the failure fields go, a Normal event says so.
        let healthy = primary(ArchivingReport {
            stanza: "orders".into(),
            stanza_created: true,
            ..ArchivingReport::default()
        });
        apply(
            &mut status,
            Some(&target()),
            Some(&healthy),
            Some(3),
            &now(),
        );
        assert_eq!(condition(&status).0, "True");
        assert_eq!(
            status.backup.as_ref().and_then(|b| b.archive_error.clone()),
            None
        );
        let recovered = notes(Some(&before), &status);
        assert_eq!(recovered.len(), 1);
        assert!(!recovered[0].warning);

        // A directory's failure names the volume's claim.
        let on_volume = ArchiveTarget {
            url: "file:///pg".into(),
            credentials_secret: None,
            volume_claim: Some("pg-backups".into()),
        };
        let mut status = PostgresClusterStatus::default();
        apply(
            &mut status,
            Some(&on_volume),
            Some(&report),
            Some(3),
            &now(),
        );
        let message = condition(&status).2;
        assert!(
            message.contains("file:///pg") && message.contains("claim pg-backups"),
            "{message}"
        );
    }

    #[test]
    fn a_silent_primary_changes_nothing_and_no_archiving_removes_the_condition() {
        let mut status = PostgresClusterStatus::default();
        let report = primary(ArchivingReport {
            stanza: "orders".into(),
            stanza_created: true,
            ..ArchivingReport::default()
        });
        apply(&mut status, Some(&target()), Some(&report), None, &now());
        let before = status.clone();
        apply(&mut status, Some(&target()), None, None, &now());
        assert_eq!(status, before);
        apply(&mut status, None, Some(&report), None, &now());
        assert!(
            !status
                .conditions
                .iter()
                .any(|c| c.type_ == conditions::CONTINUOUS_ARCHIVING)
        );
    }

    /// An instance's word that the recovery target lies past the archive
    /// becomes one Warning, when it first appears.
    #[test]
    fn a_recovery_target_past_the_archive_is_one_warning() {
        let ready = |message: &str| -> PostgresClusterStatus {
            serde_json::from_value(serde_json::json!({"conditions": [{
                "type": "Ready", "status": "False", "reason": "Provisioning",
                "message": message, "lastTransitionTime": "2026-12-07T10:00:00Z"}]}))
            .expect("a status")
        };
        let before = ready("0 of 1 instances ready");
        let mut log = tusk_postgres::recovery_log::RecoveryLog::default();
        log.observe("last completed transaction was at log time 2026-12-07 10:00:00+00");
        log.observe("recovery ended before configured recovery target was reached");
        let why = log
            .target_past_archive("time 2026-12-07T11:00:00Z")
            .expect("told");
        let told = format!(
            "0 of 1 instances ready; copy-1: bootstrap failed: restore failed: {why}; db-2: other"
        );
        let after = ready(&told);
        let notes = recovery_notes(Some(&before), &after);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let text = format!("{notes:?}");
        assert!(
            text.contains("RecoveryTargetUnreached") && text.contains("2026-12-07 10:00:00+00"),
            "{text}"
        );
        assert!(recovery_notes(Some(&after), &after).is_empty());
    }
}
