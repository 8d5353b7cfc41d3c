//! `PostgresCluster` status: what the operator observes (R2, R4, R5, R25, R28).
//!
//! Written only by the operator, through the status subresource.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Observed state of a PostgresCluster.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PostgresClusterStatus {
    /// Lifecycle phase: Pending, Provisioning, Ready, Degraded, Scaling,
    /// Upgrading or Deleting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClusterPhase>,

    /// Conditions: Ready, Progressing and Degraded, plus FailoverBlocked and
    /// others when they apply. A condition's reason tells a transient
    /// problem (the operator retries) from a permanent one (the spec must
    /// change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Every instance, as last observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceStatus>,

    /// Number of instances ready to serve.
    #[serde(default)]
    pub ready_instances: i32,

    /// The label selector of the cluster's pods as a string
    /// (`tusk.dev/cluster=<name>`): the scale subresource reports it, so a
    /// HorizontalPodAutoscaler can find the pods whose metrics it reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Instance that reports itself as primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_primary: Option<String>,

    /// Instance the operator has chosen to be primary; instance managers
    /// converge to it (promote or follow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_primary: Option<String>,

    /// The version of the primary lease (`<cluster>-primary`) that the
    /// operator found expired, released or given up when it chose
    /// `targetPrimary` by a failover: the target's instance manager may
    /// take the lease over at exactly this version, so the former holder
    /// cannot have renewed it meanwhile (see docs/operator.md, Failover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_lease_takeover: Option<String>,

    /// Highest instance serial handed out; serials are never reused, so a
    /// new instance never inherits an old one's name.
    #[serde(default)]
    pub latest_instance_serial: i32,

    /// The most recent failover or switchover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failover: Option<FailoverRecord>,

    /// A failover under way that needs a person: what is blocked and what
    /// an approval must quote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverStatus>,

    /// Progress of a major-version upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeStatus>,

    /// The PostgreSQL major version the instances' data runs. It changes
    /// only through a major upgrade: a declared `spec.postgres.version`
    /// that differs is not applied to pods until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_version: Option<i32>,

    /// A rolling update of the instances' pods under way: which instance,
    /// why, and what is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,

    /// Backups and WAL archiving as observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupStatus>,

    /// The most recent restore rehearsal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_restore_verification: Option<RestoreVerification>,

    /// When the operator last finished a reconcile of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,

    /// The last spec the operator accepted. While the declared spec is
    /// invalid (the `InvalidSpec` condition says why), the operator keeps
    /// the cluster as this spec declares it: lost pods and volumes are
    /// recreated, Services, certificates and failover kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_valid_spec: Option<LastValidSpec>,

    /// Each declared role as the primary last reported it: `Reconciled`,
    /// or `Failed` with the reason (docs/roles.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<super::RoleStatus>,
}

/// A spec the operator accepted, recorded so that a later invalid edit, or
/// a restarted operator facing one, still knows what to maintain.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LastValidSpec {
    /// The cluster's `metadata.generation` when this spec was declared.
    pub generation: i64,
    /// The spec as it was declared. Kept as written and not checked by
    /// the API server (so that no rule of the spec's schema runs again on
    /// status writes); the operator validates it again before using it.
    #[schemars(schema_with = "recorded_spec")]
    pub spec: serde_json::Value,
}

impl LastValidSpec {
    /// The recorded spec, read as a spec.
    pub fn read(&self) -> Result<super::PostgresClusterSpec, serde_json::Error> {
        serde_json::from_value(self.spec.clone())
    }
}

/// An object of any fields: the schema of a recorded spec.
fn recorded_spec(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Lifecycle phase (R4).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterPhase {
    /// Accepted; nothing created yet.
    Pending,
    /// Creating instances until all are ready.
    Provisioning,
    /// Every declared instance is ready and replicating.
    Ready,
    /// Something failed; the conditions say what and whether it is retried.
    Degraded,
    /// Adding or removing instances.
    Scaling,
    /// Rolling an update through the instances' pods, or running an
    /// approved major-version upgrade.
    Upgrading,
    /// Being deleted; waiting for cleanup.
    Deleting,
}

impl ClusterPhase {
    /// The phase as written in status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Provisioning => "Provisioning",
            Self::Ready => "Ready",
            Self::Degraded => "Degraded",
            Self::Scaling => "Scaling",
            Self::Upgrading => "Upgrading",
            Self::Deleting => "Deleting",
        }
    }
}

impl std::fmt::Display for ClusterPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One instance as observed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// Instance name (also its pod's and volume's name).
    pub name: String,
    /// `primary`, `replica`, or `unknown` when the instance cannot be reached.
    pub role: String,
    /// Ready to serve: accepting connections and, for a replica, streaming.
    pub ready: bool,
    /// PostgreSQL timeline, as last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<i64>,
    /// Current WAL position (primary) or last replayed position (replica),
    /// as last reported: an instance that stops answering keeps its last
    /// known position, which a failover compares standbys against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsn: Option<String>,
    /// How the primary last listed this standby in synchronous replication:
    /// `sync` or `quorum` (it confirms commits), `potential` or `async`.
    /// Kept while the primary does not answer, so a failover knows which
    /// standbys hold every acknowledged commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_state: Option<String>,
    /// The WAL position the primary last reported this standby had
    /// flushed, kept while the primary does not answer: with `syncState`,
    /// what a failover knows every acknowledged commit reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_lsn: Option<String>,
    /// Bytes of WAL the replica has still to replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_bytes: Option<i64>,
    /// A former data directory kept on the instance's volume after a fresh
    /// clone replaced it (it may hold writes no other instance has); it
    /// stays until deleted by hand, and while it does, no further clone
    /// replaces this instance's data (docs/runbook.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_copy: Option<String>,
    /// Where the WAL that rewinds of this instance discarded is kept on its
    /// volume, one folder per rewind (it may hold writes no other instance
    /// has; read it with pg_waldump); it stays until deleted by hand
    /// (docs/runbook.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_wal: Option<String>,
    /// Set while the instance's pod waits for a node: why, in the
    /// scheduler's words when it has looked at the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unscheduled: Option<Unscheduled>,
}

/// Why an instance's pod is not on a node yet.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Unscheduled {
    /// `Unschedulable`: the scheduler found no node for the pod;
    /// `NotScheduledYet`: no scheduler has looked at it.
    pub reason: SchedulingReason,
    /// The scheduler's message (`0/3 nodes are available: ...`), or what
    /// is known of a pod no scheduler has looked at.
    pub message: String,
}

/// Why a pod is not on a node: the reason of `unscheduled`, and of the
/// `Ready` condition while an instance waits for a node.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum SchedulingReason {
    /// The scheduler looked at the pod and placed it nowhere (its
    /// `PodScheduled` condition is False): no node fits, or none exists.
    Unschedulable,
    /// No scheduler has looked at the pod since it was created, a while
    /// ago: none runs, or the pod names one that does not.
    NotScheduledYet,
}

impl SchedulingReason {
    /// The reason as written in status and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unschedulable => "Unschedulable",
            Self::NotScheduledYet => "NotScheduledYet",
        }
    }
}

impl std::fmt::Display for SchedulingReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl InstanceStatus {
    /// `role` of an instance whose manager did not answer.
    pub const UNKNOWN_ROLE: &'static str = "unknown";

    /// The role the instance last reported; `None` when it did not answer.
    pub fn reported_role(&self) -> Option<crate::instance::InstanceRole> {
        crate::instance::InstanceRole::parse(&self.role)
    }
}

/// A failover or switchover, and what it may have cost (R25).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailoverRecord {
    /// When the new primary was chosen, then, once it reports serving,
    /// when it was seen promoted; to the microsecond, as the promotion's
    /// `durationSeconds` is counted from the decision's.
    pub time: MicroTime,
    /// The former primary.
    pub from: String,
    /// The promoted instance.
    pub to: String,
    /// Why: `Failover` (the primary failed), `Switchover` (requested) or
    /// `ApprovedFailover` (a blocked failover approved by a person).
    pub reason: String,
    /// Bytes of WAL between the former primary's last observed position
    /// and what the promoted one received: what may have been lost, as far
    /// as the operator saw (the primary may have written more since it was
    /// last observed). 0 when synchronous replication proves that no
    /// acknowledged commit is lost.
    pub lsn_gap_bytes: i64,
    /// Where the promoted instance's history ends and the new timeline starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point: Option<RecoveryPoint>,
    /// Seconds from the primary's failure (or the switchover request) to
    /// the new primary serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// Standbys this failover chose before `to` whose promotion was
    /// abandoned (they did not serve within
    /// `spec.failover.promotionTimeoutSeconds`, or their pods were being
    /// deleted), in the order they were chosen. None of them is chosen
    /// again by this failover.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub abandoned: Vec<String>,
}

/// A failover under way that needs a person (R25, R29).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct FailoverStatus {
    /// The failover `dataDurability: required` blocked, while it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<BlockedFailover>,
}

/// A failover that could lose acknowledged commits, waiting for approval.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlockedFailover {
    /// This decision's identity: derived from `from`, `to`, `lsnGapBytes`
    /// and `since`, so it changes when any of them does. The
    /// `tusk.dev/approve-data-loss` annotation must have exactly this value
    /// to approve it; any other value approves nothing.
    pub id: String,
    /// The failed primary.
    pub from: String,
    /// The standby an approval would promote.
    pub to: String,
    /// Bytes of WAL the failed primary may have had beyond `to`.
    pub lsn_gap_bytes: i64,
    /// Since when this decision has been blocked.
    pub since: Time,
    /// The last approval that did not quote `id` (it approved nothing and
    /// was removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_approval: Option<String>,
}

/// A position in the WAL history.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryPoint {
    /// WAL position, e.g. `0/3000148`.
    pub lsn: String,
    /// Commit time of the last transaction at that position, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

/// A rolling update of pods whose template differs from the declared one.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// What happens now: ReplacingReplica, WaitingForReplica, Switchover,
    /// RestartingPrimary, Paused or WaitingForSlot.
    pub step: String,
    /// The instance being replaced or switched over to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Why: what changed (`spec.postgres.image`, `spec.resources`,
    /// `spec.podTemplate`, `spec.postgres.version`, or the operator's
    /// version).
    pub reason: String,
    /// Instances whose pods are still outdated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outdated: Vec<String>,
    /// Set only when the operator's own version is the whole reason: such
    /// rollouts run for a limited number of clusters at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator_upgrade: bool,
}

/// Progress of an approved major-version upgrade (R27), a state machine
/// whose every step is recorded with its time (see docs/upgrades.md).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStatus {
    /// Version before the upgrade.
    pub from_version: i32,
    /// Version being upgraded to.
    pub to_version: i32,
    /// Current step: WaitingForBackup (refused until a recent backup or
    /// an override), PreChecking (`pg_upgrade --check` on a restore of the
    /// newest backup, every instance serving), StoppingInstances (writes
    /// fenced), Upgrading
    /// (`pg_upgrade` on the primary's volume), StartingPrimary,
    /// RecloningReplicas, then Completed or Failed.
    pub step: String,
    /// When the upgrade started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// What the current step is doing or why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every step taken, with the time it began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<UpgradeStepRecord>,
    /// The instance whose volume was upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Set when the upgrade started without a recent backup, by the
    /// override annotation: what it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_override: Option<String>,
    /// The cluster's generation a failed upgrade was tried at: it is tried
    /// again only after the spec changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// One step of a major upgrade and when it began.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStepRecord {
    /// The step (as `step` names it).
    pub step: String,
    /// When it began.
    pub time: Time,
}

/// Backups and WAL archiving as observed (R28).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Id of the newest completed base backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_backup: Option<String>,
    /// When the newest completed base backup finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_backup_time: Option<Time>,
    /// Earliest moment the cluster can be restored to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_recoverability_point: Option<Time>,
    /// Name of the newest archived WAL segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_wal: Option<String>,
    /// When it was archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_wal_time: Option<Time>,
    /// The WAL segment whose archiving failed last, if archiving is
    /// failing now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_archive: Option<String>,
    /// When archiving last failed, if it is failing now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_archive_time: Option<Time>,
    /// Why archiving fails, in pgBackRest's words (the failing request and
    /// the object store's answer), if it is failing now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_error: Option<String>,
    /// Finished WAL segments the primary keeps until they are archived:
    /// a growing number while archiving fails is disk filling up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_wal_segments: Option<i64>,
    /// The backup being taken now, and by which instance: the operator
    /// assigns one PostgresBackup at a time; the instance's manager runs
    /// it and reports the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<BackupAssignment>,
    /// When the schedule (`spec.backup.schedule`) last created a backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_backup: Option<Time>,
}

/// One PostgresBackup assigned to one instance.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupAssignment {
    /// The PostgresBackup's name.
    pub backup: String,
    /// The instance taking it.
    pub instance: String,
    /// Full, differential or incremental.
    #[serde(rename = "type")]
    pub backup_type: super::BackupType,
    /// For a standby: the primary's pgBackRest TLS server it backs up
    /// through, as the primary reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_server: Option<BackupServer>,
}

/// A primary's pgBackRest TLS server, through which a standby takes a base
/// backup: where it listens, and where the primary's PostgreSQL is on its
/// host (pgBackRest checks the data directory against the server's).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupServer {
    /// `address:port` of the server (the primary pod's address).
    pub address: String,
    /// The primary's data directory.
    pub data_directory: String,
    /// Its PostgreSQL's unix socket directory.
    pub socket_directory: String,
    /// Its PostgreSQL's port.
    // kube-apiserver warns of formats it does not know, such as the
    // `uint16` schemars gives a u16: declared as an int32 in range.
    #[schemars(range(min = 1, max = 65535), extend("format" = "int32"))]
    pub port: u16,
}

/// The outcome of a restore rehearsal (R28).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RestoreVerification {
    /// When the rehearsal finished.
    pub time: Time,
    /// The backup that was restored.
    pub backup_id: String,
    /// Whether the restored data passed its checks.
    pub succeeded: bool,
    /// Seconds the restore took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// The point the restore reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point: Option<RecoveryPoint>,
    /// The check that failed: `backup` (none to restore), `restore`,
    /// `recovery`, `sentinel`, `amcheck` or `rehearsal` (the rehearsal pod
    /// itself failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_check: Option<String>,
    /// What was checked, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failover_record_keeps_its_time_to_the_microsecond() {
        let record: FailoverRecord = serde_json::from_value(serde_json::json!({
            "time": "2026-12-06T10:00:00.250125Z", "from": "db-1", "to": "db-2",
            "reason": "Failover", "lsnGapBytes": 0,
        }))
        .expect("a record");
        let written = serde_json::to_value(&record).expect("serialized");
        assert_eq!(written["time"], "2026-12-06T10:00:00.250125Z");
        // One written in whole seconds before still reads.
        let older: FailoverRecord = serde_json::from_value(serde_json::json!({
            "time": "2026-12-06T10:00:00Z", "from": "db-1", "to": "db-2",
            "reason": "Failover", "lsnGapBytes": 0,
        }))
        .expect("a record in whole seconds");
        assert!(older.time.0 < record.time.0);
    }
}
