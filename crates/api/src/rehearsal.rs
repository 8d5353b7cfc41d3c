//! Restore rehearsals (R28): the contract between the operator, which runs
//! one as a pod of its own (`<cluster>-rehearsal`, on a scratch volume of
//! the same name, serving no one), and `tusk instance rehearse`, which the
//! pod runs.
//!
//! The pod restores the cluster's newest base backup and the WAL archived
//! after it, recovers to the end of that WAL, checks what it restored
//! ([`Check`]) and writes its [`Outcome`] as JSON to its termination
//! message file ([`TERMINATION_MESSAGE_PATH`]), which Kubernetes copies into
//! the container's terminated state, where the operator reads it: the
//! operator never connects to the pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use crate::v1alpha1::RecoveryPoint;

/// Kubernetes' default `terminationMessagePath`.
pub const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The most of a termination message Kubernetes keeps.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// The environment variable naming the file the outcome is written to.
pub const RESULT_ENV: &str = "TUSK_REHEARSAL_RESULT";
/// The name of a cluster's rehearsal pod and scratch volume.
pub fn pod_name(cluster: &str) -> String {
    format!("{cluster}-rehearsal")
}

/// What a rehearsal checks, in order; the first that fails ends it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Check {
    /// The repository lists a base backup to restore.
    Backup,
    /// `pgbackrest restore` of that backup succeeds (it verifies every
    /// file's checksum as it copies).
    Restore,
    /// PostgreSQL replays the archived WAL, reaches a consistent state and
    /// ends recovery at the end of the archive.
    Recovery,
    /// The sentinel row written just before the backup started is there.
    Sentinel,
    /// `pg_amcheck` finds no corruption in any database.
    Amcheck,
}

impl Check {
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Backup => "backup",
            Check::Restore => "restore",
            Check::Recovery => "recovery",
            Check::Sentinel => "sentinel",
            Check::Amcheck => "amcheck",
        }
    }
}

/// What a rehearsal found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// pgBackRest's label of the backup restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_id: Option<String>,
    /// The PostgresBackup it was taken for (its pgBackRest annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// The check that failed; `None` when every check passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_check: Option<Check>,
    /// What was checked, or why the failed check failed.
    pub message: String,
    /// Where recovery ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point: Option<RecoveryPoint>,
    /// Seconds from the start of the restore to the end of the checks.
    pub duration_seconds: f64,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.failed_check.is_none()
    }

    /// The outcome as a termination message: JSON of at most
    /// [`MAX_MESSAGE_BYTES`], the message shortened when it would not fit
    /// (an error's last lines are the ones that name it).
    pub fn to_message(&self) -> String {
        let mut outcome = self.clone();
        loop {
            let text = serde_json::to_string(&outcome).unwrap_or_default();
            if text.len() <= MAX_MESSAGE_BYTES || outcome.message.is_empty() {
                return text;
            }
            let excess = text.len() - MAX_MESSAGE_BYTES + 3;
            let mut cut = excess.min(outcome.message.len());
            while !outcome.message.is_char_boundary(cut) {
                cut += 1;
            }
            outcome.message = format!("...{}", &outcome.message[cut..]);
        }
    }

    /// The outcome a termination message carries, if it is one.
    pub fn from_message(message: &str) -> Option<Self> {
        serde_json::from_str(message.trim()).ok()
    }
}

/// `status.lastRestoreVerification` for an outcome finished at `time`.
pub fn verification(outcome: &Outcome, time: Time) -> crate::v1alpha1::RestoreVerification {
    crate::v1alpha1::RestoreVerification {
        time,
        backup_id: outcome.backup_id.clone().unwrap_or_default(),
        succeeded: outcome.succeeded(),
        duration_seconds: Some(outcome.duration_seconds),
        recovery_point: outcome.recovery_point.clone(),
        failed_check: outcome.failed_check.map(|c| c.as_str().to_owned()),
        message: Some(outcome.message.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(message: &str) -> Outcome {
        Outcome {
            backup_id: Some("20261204-101500F".into()),
            backup: Some("db-20261204101500".into()),
            failed_check: Some(Check::Restore),
            message: message.to_owned(),
            recovery_point: None,
            duration_seconds: 1.5,
        }
    }

    #[test]
    fn an_outcome_survives_its_termination_message() {
        let sent = outcome("checksum mismatch");
        assert_eq!(Outcome::from_message(&sent.to_message()), Some(sent));
        assert_eq!(Outcome::from_message("not json"), None);
    }

    #[test]
    fn a_long_message_is_cut_at_its_start_to_fit_kubernetes_limit() {
        let long = format!("{}the end names the error", "é".repeat(5000));
        let text = outcome(&long).to_message();
        assert!(text.len() <= MAX_MESSAGE_BYTES, "{}", text.len());
        let back = Outcome::from_message(&text).expect("still JSON");
        assert!(back.message.starts_with("..."));
        assert!(back.message.ends_with("the end names the error"));
        assert_eq!(back.failed_check, Some(Check::Restore));
    }
}
