//! `PostgresBackup`: one on-demand base backup of a cluster (R28).

// kube's `printcolumn(...)` attributes repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules;

/// A request for one base backup of a PostgresCluster, and its record.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "postgres.tusk.dev",
    version = "v1alpha1",
    kind = "PostgresBackup",
    plural = "postgresbackups",
    shortname = "pgb",
    category = "tusk",
    namespaced,
    status = "PostgresBackupStatus",
    derive = "PartialEq",
    doc = "One base backup of a PostgresCluster to its object store. The spec is a request and never changes; status records where the backup is and what it covers.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.cluster",
        description = "Cluster backed up"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Backup phase"
    ),
    printcolumn(
        name = "Started",
        type_ = "date",
        json_path = ".status.startedAt",
        description = "When the backup started"
    ),
    printcolumn(
        name = "Completed",
        type_ = "date",
        json_path = ".status.completedAt",
        description = "When the backup completed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = rules::backup_spec_is_immutable())]
#[serde(rename_all = "camelCase")]
pub struct PostgresBackupSpec {
    /// Name of the PostgresCluster to back up, in the same namespace.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// Which instance takes the backup: `preferReplica` (the default) uses
    /// a streaming replica when one is ready, sparing the primary;
    /// `primary` always uses the primary.
    #[serde(default)]
    pub target: BackupTarget,

    /// `full` (the default: everything, restorable on its own),
    /// `differential` (what changed since the last full backup) or
    /// `incremental` (what changed since the last backup of any type).
    /// pgBackRest takes a full backup instead when there is none to
    /// build on.
    #[serde(default, rename = "type")]
    pub backup_type: BackupType,
}

/// How much a backup copies.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum BackupType {
    /// Every file of the data directory.
    #[default]
    Full,
    /// Files changed since the last full backup.
    Differential,
    /// Files changed since the last backup.
    Incremental,
}

impl BackupType {
    /// pgBackRest's name for it (`--type`).
    pub fn pgbackrest(self) -> &'static str {
        match self {
            BackupType::Full => "full",
            BackupType::Differential => "diff",
            BackupType::Incremental => "incr",
        }
    }
}

/// Which instance takes a backup.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum BackupTarget {
    /// A ready replica if there is one, otherwise the primary.
    #[default]
    PreferReplica,
    /// Always the primary.
    Primary,
}

/// The record of one backup.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PostgresBackupStatus {
    /// Pending, Running, Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,
    /// Deterministic id of the backup in the object store; a retried
    /// request reuses it and never duplicates work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_id: Option<String>,
    /// When the backup started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the backup completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// WAL position where the backup starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin_lsn: Option<String>,
    /// WAL position the backup is consistent at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_lsn: Option<String>,
    /// Timeline the backup was taken on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<i64>,
    /// Where the backup is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Size of the stored backup in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// The instance that took the backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Why the backup failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PostgresBackupStatus {
    /// True once the backup completed or failed: nothing changes it after.
    pub fn finished(&self) -> bool {
        matches!(
            self.phase,
            Some(BackupPhase::Completed | BackupPhase::Failed)
        )
    }
}

/// Phase of a backup.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupPhase {
    /// Accepted, not started.
    Pending,
    /// Copying data.
    Running,
    /// Stored and complete.
    Completed,
    /// Stopped with an error.
    Failed,
}
