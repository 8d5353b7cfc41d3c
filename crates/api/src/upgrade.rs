//! Major-version upgrades (R27): the contract between the operator, which
//! runs the upgrade of the primary's volume in a pod of its own
//! (`<cluster>-upgrade`, serving no one, while every instance is stopped),
//! and `tusk instance upgrade`, which that pod runs.
//!
//! The pod runs the new major's image. An init container of the old
//! image copies the old major's installation into the pod's scratch
//! directory ([`OLD_INSTALL_DIR`]: `usr/lib/postgresql/<old>` and
//! `usr/share/postgresql/<old>` under it, the layout PostgreSQL's
//! relocatable programs expect), whose `bin` the pod names in
//! [`OLD_BIN_DIR_ENV`]. `tusk instance upgrade` then, on the volume
//! mounted at [`crate::contract::DATA_MOUNT`]:
//!
//! 1. makes an empty cluster of the new major at [`new_data_dir`];
//! 2. runs `pg_upgrade --check` (the rollback point: neither cluster was
//!    changed, the old one is started again as it was);
//! 3. runs `pg_upgrade --link`; if it fails, the old cluster's
//!    `pg_control` is put back, so the old cluster starts again;
//! 4. swaps the directories (the new cluster becomes
//!    [`crate::contract::PGDATA`]), removes the old one, and leaves
//!    [`ANALYZE_MARKER`] on the volume: the instance manager that next
//!    serves the data as primary gathers planner statistics in stages and
//!    removes it.
//!
//! Every step can run again after an interruption: a volume whose
//! `PG_VERSION` already names the new major is upgraded, and the pod
//! reports success. The [`Outcome`] is written as JSON to the termination
//! message file ([`crate::rehearsal::TERMINATION_MESSAGE_PATH`]), where the
//! operator reads it.
//!
//! Before any instance stops, when the cluster has a backup to restore,
//! a pre-check pod ([`check_pod_name`]) of the same shape, on a scratch
//! volume of the cluster's size instead of the primary's, runs `tusk
//! instance upgrade-check`: the newest backup restored and recovered by
//! the old major, then steps 1 to 3 on that copy (`--link` too: only a
//! real upgrade restores the schema in the new major, and a copy may be
//! changed). Its [`Outcome`] names [`Step::Restore`], [`Step::Prepare`],
//! [`Step::Check`] or [`Step::Link`] when one failed; the upgrade is then
//! failed with every instance still serving.

use serde::{Deserialize, Serialize};

/// The environment variable naming the file the outcome is written to.
pub const RESULT_ENV: &str = "TUSK_UPGRADE_RESULT";
/// The environment variable naming the old major's `bin` directory.
pub const OLD_BIN_DIR_ENV: &str = "TUSK_UPGRADE_OLD_BIN_DIR";
/// Where the upgrade pod's init container puts the old installation.
pub const OLD_INSTALL_DIR: &str = "/run/tusk-upgrade/old";
/// Where the new cluster is made, beside `pgdata` on the same volume (so
/// `--link` can hard-link).
pub const NEW_DATA_DIR_PREFIX: &str = "/var/lib/postgresql/data/pgdata-upgrade-";
/// Left on the volume once the data is upgraded; removed by the instance
/// manager after it gathered planner statistics.
pub const ANALYZE_MARKER: &str = "/var/lib/postgresql/data/analyze-after-upgrade";

/// The name of a cluster's upgrade pod.
pub fn pod_name(cluster: &str) -> String {
    format!("{cluster}-upgrade")
}

/// The name of a cluster's pre-check pod and of its scratch volume.
pub fn check_pod_name(cluster: &str) -> String {
    format!("{cluster}-upgrade-check")
}

/// Where the new cluster of `major` is made.
pub fn new_data_dir(major: u32) -> String {
    format!("{NEW_DATA_DIR_PREFIX}{major}")
}

/// The old major's `bin` directory inside [`OLD_INSTALL_DIR`].
pub fn old_bin_dir(major: u32) -> String {
    format!("{OLD_INSTALL_DIR}/usr/lib/postgresql/{major}/bin")
}

/// The step of an upgrade pod, as its outcome names the one that failed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// Restoring the newest backup for the pre-check (the pre-check pod
    /// only).
    Restore,
    /// Making the new cluster (`initdb` of the new major).
    Prepare,
    /// `pg_upgrade --check`.
    Check,
    /// `pg_upgrade --link`.
    Link,
    /// Putting the new cluster in place of the old one.
    Swap,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Restore => "restore",
            Step::Prepare => "prepare",
            Step::Check => "check",
            Step::Link => "link",
            Step::Swap => "swap",
        }
    }

    /// Whether a failure at this step left the old cluster as it was (it
    /// can be started again with the old major).
    pub fn old_cluster_intact(self) -> bool {
        !matches!(self, Step::Swap)
    }
}

/// What an upgrade pod did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The major the data had before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<u32>,
    /// The major the data has now (the new one when it succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_version: Option<u32>,
    /// The step that failed; `None` when the data is upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_step: Option<Step>,
    /// What was done, or why the failed step failed.
    pub message: String,
    /// Seconds from the pod's start to its end.
    pub duration_seconds: f64,
}

impl Outcome {
    /// The outcome a termination message holds, if it holds one.
    pub fn from_message(message: &str) -> Option<Self> {
        serde_json::from_str(message.trim()).ok()
    }

    /// The outcome as a termination message: JSON, within
    /// [`crate::rehearsal::MAX_MESSAGE_BYTES`] (a long message is cut).
    pub fn to_message(&self) -> String {
        let mut outcome = self.clone();
        loop {
            let text = serde_json::to_string(&outcome).unwrap_or_default();
            if text.len() <= crate::rehearsal::MAX_MESSAGE_BYTES || outcome.message.is_empty() {
                return text;
            }
            let keep = outcome.message.len().saturating_sub(text.len() - 4000);
            let mut cut = keep.min(outcome.message.len().saturating_sub(1));
            while !outcome.message.is_char_boundary(cut) {
                cut -= 1;
            }
            outcome.message.truncate(cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_round_trips_through_a_termination_message_and_a_long_one_is_cut() {
        let outcome = Outcome {
            from_version: Some(15),
            data_version: Some(15),
            failed_step: Some(Step::Check),
            message: "é".repeat(5000),
            duration_seconds: 1.5,
        };
        let text = outcome.to_message();
        assert!(
            text.len() <= crate::rehearsal::MAX_MESSAGE_BYTES,
            "{}",
            text.len()
        );
        let read = Outcome::from_message(&text).expect("an outcome");
        assert_eq!(read.failed_step, Some(Step::Check));
        assert!(read.message.starts_with("éé"));
        assert_eq!(Outcome::from_message("pg_upgrade crashed"), None);
    }

    #[test]
    fn only_a_failed_swap_leaves_the_old_cluster_changed() {
        assert!(Step::Link.old_cluster_intact());
        assert!(!Step::Swap.old_cluster_intact());
        assert_eq!(
            old_bin_dir(15),
            "/run/tusk-upgrade/old/usr/lib/postgresql/15/bin"
        );
        assert_eq!(
            new_data_dir(16),
            "/var/lib/postgresql/data/pgdata-upgrade-16"
        );
        // Both on the data volume, beside the data directory.
        for path in [NEW_DATA_DIR_PREFIX, ANALYZE_MARKER] {
            let parent = std::path::Path::new(path).parent();
            assert_eq!(
                parent,
                Some(std::path::Path::new(crate::contract::DATA_MOUNT))
            );
        }
    }
}
