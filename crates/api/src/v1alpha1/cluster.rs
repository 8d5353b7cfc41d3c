//! `PostgresCluster` spec: what a user declares (R1, R3).
//!
//! Every doc comment here becomes a CRD description that `kubectl explain`
//! shows, so they are written for users. Rules that Kubernetes evaluates at
//! admission are declared with `x_kube(validation = ...)` next to the field
//! they protect; `crate::admission` evaluates the same declarations locally.

// kube's `printcolumn(...)` attributes repeat the same keys by design.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tusk_postgres::version::{NEWEST_MAJOR, OLDEST_MAJOR};

use super::rules;
use super::status::PostgresClusterStatus;

/// A PostgreSQL cluster: one primary and streaming replicas, with the storage,
/// durability, upgrade, backup and deletion policies its owner declares.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "postgres.tusk.dev",
    version = "v1alpha1",
    kind = "PostgresCluster",
    plural = "postgresclusters",
    shortname = "pgc",
    category = "tusk",
    namespaced,
    status = "PostgresClusterStatus",
    scale(
        spec_replicas_path = ".spec.instances",
        status_replicas_path = ".status.readyInstances",
        label_selector_path = ".status.selector"
    ),
    derive = "PartialEq",
    doc = "A PostgreSQL cluster managed by Tusk: a primary with streaming replicas, their volumes, Services, backups and policies. Users declare intent in spec; the operator reports what it observes in status.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase", description = "Lifecycle phase"),
    printcolumn(name = "Instances", type_ = "integer", json_path = ".spec.instances", description = "Declared number of instances"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyInstances", description = "Instances ready to serve"),
    printcolumn(name = "Primary", type_ = "string", json_path = ".status.currentPrimary", description = "Instance currently acting as primary"),
    printcolumn(name = "Version", type_ = "integer", json_path = ".spec.postgres.version", description = "Declared PostgreSQL major version"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = rules::cluster_name_fits()
)]
#[x_kube(validation = rules::version_change_needs_approval())]
#[x_kube(validation = rules::bootstrap_is_immutable())]
#[x_kube(validation = rules::synchronous_standbys_fit())]
#[x_kube(validation = rules::synchronous_commit_keeps_durability())]
#[serde(rename_all = "camelCase")]
pub struct PostgresClusterSpec {
    /// Number of PostgreSQL instances: one primary plus `instances - 1`
    /// streaming replicas. Scaling down never removes the primary.
    #[x_kube(validation = rules::at_least_one_instance())]
    #[schemars(range(max = 64))]
    pub instances: i32,

    /// PostgreSQL version, image and server parameters.
    pub postgres: PostgresSpec,

    /// Persistent storage for each instance.
    pub storage: StorageSpec,

    /// CPU and memory requests and limits for the PostgreSQL container of
    /// every instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Streaming replication settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<ReplicationSpec>,

    /// How the operator reacts when the primary fails.
    #[serde(default)]
    pub failover: FailoverSpec,

    /// Approval and method for PostgreSQL major-version upgrades.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<UpgradeSpec>,

    /// Base backups, WAL archiving, retention and restore rehearsals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupSpec>,

    /// How the first instance gets its data: a new database (`initdb`, the
    /// default when omitted) or a restore from object storage (`recovery`).
    /// Immutable after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapSpec>,

    /// What happens to volumes and backups when the cluster is deleted.
    /// `Retain` (the default) keeps them, labelled as retained, so no data is
    /// lost by an accidental delete; `Delete` removes them with the cluster.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Additions to the pods the operator creates: labels, annotations and
    /// scheduling constraints. Everything else about the pods is the
    /// operator's choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,

    /// A NetworkPolicy for the cluster's pods (named as the cluster),
    /// admitting to PostgreSQL only the cluster's own instances and the
    /// clients listed here. Absent: the operator makes none (and removes
    /// the one it made), since NetworkPolicies add up: a policy admitting
    /// everyone would undo a narrower one of your own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,

    /// The type, annotations and labels of the `-rw`, `-ro` and `-r`
    /// Services (a load balancer, say). Absent: `ClusterIP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<super::ServicesSpec>,

    /// Annotations on the ServiceAccount the instance pods run under
    /// (workload identity for object stores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<super::ServiceAccountSpec>,

    /// Certificates of your own issuer (cert-manager, say) in place of the
    /// cluster's own authority's, where clients see them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates: Option<CertificatesSpec>,

    /// When true, the operator stops changing the cluster's children (it
    /// still reports status). Use it for manual maintenance.
    #[serde(default)]
    pub paused: bool,

    /// Database roles kept as declared on the primary (docs/roles.md):
    /// created, altered to match and, with `ensure: absent`, dropped.
    /// Roles not listed are never touched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub roles: Vec<super::RoleSpec>,
}

/// PostgreSQL version, image and server parameters.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PostgresSpec {
    /// PostgreSQL major version (15 to 18). It never goes down. Changing it
    /// is a major-version upgrade: the change is rejected at admission unless
    /// `spec.upgrade.approvedVersion` is set to the new version in the same
    /// update, so a change in Git alone never starts an upgrade.
    #[x_kube(validation = rules::version_never_decreases())]
    #[schemars(range(min = OLDEST_MAJOR, max = NEWEST_MAJOR))]
    pub version: i32,

    /// Container image for PostgreSQL. Defaults to the official
    /// `postgres:<version>` image. The image's major version must match
    /// `version`; the operator injects its own instance manager into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,

    /// PostgreSQL server parameters (postgresql.conf), as strings. Parameters
    /// that the operator owns (listening, ports, replication, archiving,
    /// TLS, file locations, logging) cannot be set here; the validation
    /// message names the offending parameter. While
    /// `spec.failover.dataDurability` is `required`, `synchronous_commit`
    /// may only be `on` (the value used when it is omitted) or
    /// `remote_apply`: any other value acknowledges commits that a
    /// failover could lose. At most 256 parameters, each value at most 1024
    /// characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 256))]
    #[schemars(extend("additionalProperties" = {
        "type": "string",
        "maxLength": crate::parameters::MAX_VALUE_LENGTH,
    }))]
    #[x_kube(validation = rules::no_operator_owned_parameters())]
    #[x_kube(validation = rules::known_parameter_names())]
    #[x_kube(validation = rules::parameter_values_parse())]
    #[x_kube(validation = rules::preload_libraries_allowed())]
    pub parameters: BTreeMap<String, String>,

    /// Whether the superuser (Secret `<cluster>-superuser`) may log in over
    /// the network, with its password and over TLS. Off by default: the
    /// superuser then logs in only inside the pod, over the unix socket,
    /// and a leaked superuser password is no use from elsewhere.
    /// Applications use the application owner (`<cluster>-app`). Turning it
    /// on or off takes effect at once (a reload), with no restart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superuser_access: bool,
}

/// Persistent storage for each instance.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::storage_class_is_immutable())]
pub struct StorageSpec {
    /// Size of each instance's volume, as a Kubernetes quantity (e.g.
    /// `500Gi`). It may grow (volumes are expanded in place) but never
    /// shrink: PostgreSQL data cannot be moved to a smaller volume safely.
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::size_is_quantity())]
    #[x_kube(validation = rules::size_never_shrinks())]
    pub size: String,

    /// StorageClass for the instances' volumes; the cluster default when
    /// omitted. Immutable after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub storage_class_name: Option<String>,
}

/// Streaming replication settings.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationSpec {
    /// Synchronous replication: a commit on the primary waits until this
    /// many standbys have flushed it. Omit for asynchronous replication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<SynchronousSpec>,
}

/// Quorum or priority synchronous replication.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SynchronousSpec {
    /// `any` waits for any `number` standbys (quorum commit, `ANY n`);
    /// `first` waits for the first `number` standbys in priority order
    /// (`FIRST n`).
    #[serde(default)]
    pub mode: SynchronousMode,

    /// How many standbys must confirm each commit. Must be lower than
    /// `spec.instances`.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 63))]
    pub number: i32,
}

/// Synchronous replication method; PostgreSQL's, so defined in
/// `tusk-postgres`.
pub use tusk_postgres::synchronous::SynchronousMode;

/// How the operator reacts when the primary fails.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailoverSpec {
    /// Seconds the primary must stay unhealthy, unready or unreachable
    /// before a standby is promoted, counted from the first evidence of the
    /// failure (whole seconds, so up to one more second is waited). The
    /// default of 5 lets the instance manager restart a crashed PostgreSQL
    /// in place (about a second), which loses nothing, while a hung primary
    /// is replaced and writes resume in under ten seconds.
    #[serde(default = "default_failover_delay")]
    #[schemars(range(min = 0, max = 3600))]
    pub delay_seconds: i32,

    /// `required` (the default) promotes only a standby known to hold every
    /// acknowledged commit; otherwise failover stops with a FailoverBlocked
    /// condition until someone approves the possible loss. `preferred`
    /// promotes the most advanced standby and records the possible loss in
    /// `status.lastFailover`.
    #[serde(default)]
    pub data_durability: DataDurability,

    /// Seconds a chosen standby has to report that it serves as the
    /// primary, counted from the failover decision. A promotion that takes
    /// longer (the standby died, hangs or is being deleted) is abandoned and
    /// the next best standby is chosen, never the abandoned one. Raise it
    /// when standbys may have much received WAL still to replay: a standby
    /// finishes replaying before it promotes.
    #[serde(default = "default_promotion_timeout")]
    #[schemars(range(min = 5, max = 3600))]
    pub promotion_timeout_seconds: i32,
}

impl Default for FailoverSpec {
    fn default() -> Self {
        Self {
            delay_seconds: default_failover_delay(),
            data_durability: DataDurability::default(),
            promotion_timeout_seconds: default_promotion_timeout(),
        }
    }
}

/// The recovery point objective a failover must honour.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum DataDurability {
    /// Never lose an acknowledged commit automatically.
    #[default]
    Required,
    /// Prefer availability: promote the best standby, report the gap.
    Preferred,
}

/// Approval and method for PostgreSQL major-version upgrades (R27).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeSpec {
    /// The major version the owner approves upgrading to. A change of
    /// `spec.postgres.version` is accepted only when it equals this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = OLDEST_MAJOR, max = NEWEST_MAJOR))]
    pub approved_version: Option<i32>,

    /// How the primary is updated once the replicas are: `switchover` (the
    /// default) promotes an updated replica first; `restart` restarts the
    /// primary in place.
    #[serde(default)]
    pub primary_update_method: PrimaryUpdateMethod,

    /// An upgrade starts only if a successful backup is at most this many
    /// hours old.
    #[serde(default = "default_backup_max_age_hours")]
    #[schemars(range(min = 1, max = 8760))]
    pub backup_max_age_hours: i32,
}

/// How the primary is updated during a rollout.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum PrimaryUpdateMethod {
    /// Switch over to an already updated replica, then update the former primary.
    #[default]
    Switchover,
    /// Restart the primary in place (shorter, but a write outage).
    Restart,
}

/// Base backups, WAL archiving, retention and restore rehearsals (R28).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// Where backups and archived WAL are stored.
    pub destination: ObjectStore,

    /// Days a base backup is kept; WAL older than the oldest kept base
    /// backup is removed with it.
    #[serde(default = "default_retention_days")]
    #[schemars(range(min = 1, max = 3650))]
    pub retention_days: i32,

    /// When base backups are taken, as a five-field cron expression in UTC
    /// (minute hour day-of-month month day-of-week) or one of `@hourly`,
    /// `@daily`, `@weekly`, `@monthly`. Omit to take backups only on demand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    #[x_kube(validation = rules::cron_schedule())]
    pub schedule: Option<String>,

    /// Archive every WAL segment continuously, allowing point-in-time
    /// recovery between base backups.
    #[serde(default = "yes")]
    pub wal_archiving: bool,

    /// Restore rehearsals: a backup is restored into a scratch instance and
    /// checked, proving it is restorable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySpec>,
}

/// Restore rehearsal schedule.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VerifySpec {
    /// When to rehearse a restore of the latest backup, as a cron expression
    /// like `spec.backup.schedule`.
    #[schemars(length(max = 128))]
    #[x_kube(validation = rules::cron_schedule())]
    pub schedule: String,
}

/// Where backups and archived WAL are kept: a bucket of an object store,
/// or a directory on a volume.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::directory_repository_on_a_volume())]
#[x_kube(validation = rules::volume_repository_takes_no_service_settings())]
#[x_kube(validation = rules::azure_repository_names_its_key())]
pub struct ObjectStore {
    /// Bucket and prefix as a URL: `s3://bucket/prefix`, `gs://bucket/prefix`,
    /// `az://container/prefix` (Azure Blob Storage), or `file:///path` for
    /// a directory on the volume `volumeClaim` names.
    #[schemars(length(max = 1024))]
    #[x_kube(validation = rules::object_store_url())]
    pub url: String,

    /// Name of a PersistentVolumeClaim in the cluster's namespace holding
    /// a `file:///path` repository (required with such a URL, refused
    /// with any other). Every instance, backup and restore rehearsal
    /// mounts it, so it must be shareable between them: ReadWriteMany
    /// when instances run on different nodes (NFS, CephFS, EFS and the
    /// like). A volume on the cluster's own nodes shares their fate: keep
    /// it elsewhere, or also back up to an object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = rules::object_name())]
    pub volume_claim: Option<String>,

    /// Endpoint (`https://host[:port]`) of an S3-compatible service (e.g.
    /// MinIO), of a service speaking GCS's JSON API, or of one speaking
    /// Azure's Blob API (e.g. Azurite, addressed path-style); the
    /// provider's default when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    #[x_kube(validation = rules::http_endpoint())]
    pub endpoint: Option<String>,

    /// Region of an S3 bucket (refused for GCS and Azure, whose buckets
    /// and storage accounts carry their location).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,

    /// Name of a Secret in the cluster's namespace holding the credentials
    /// (for S3: keys `ACCESS_KEY_ID` and `SECRET_ACCESS_KEY`; for GCS: key
    /// `SERVICE_ACCOUNT_KEY`, a service account's JSON key; for Azure,
    /// required: keys `AZURE_STORAGE_ACCOUNT` and `AZURE_STORAGE_KEY`, the
    /// storage account and its shared key). Omit to use the environment's
    /// ambient credentials (for GCS: workload identity or the metadata
    /// server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = rules::object_name())]
    pub credentials_secret: Option<String>,

    /// Name of a Secret in the cluster's namespace whose key `ca.crt` holds
    /// the certificate authority (PEM) that signed the endpoint's
    /// certificate, for a service with a private CA. Omit for public CAs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = rules::object_name())]
    pub ca_secret: Option<String>,
}

/// How the first instance gets its data. Exactly one method.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::exactly_one_bootstrap_method())]
pub struct BootstrapSpec {
    /// Create a new, empty database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initdb: Option<InitdbSpec>,

    /// Restore from base backups and WAL in object storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoverySpec>,
}

/// A new, empty database.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InitdbSpec {
    /// Name of the application database.
    #[serde(default = "default_app_name")]
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z_][a-z0-9_]*$"))]
    #[x_kube(validation = rules::app_database_is_new())]
    pub database: String,

    /// Name of the role that owns the application database.
    #[serde(default = "default_app_name")]
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z_][a-z0-9_]*$"))]
    #[x_kube(validation = rules::app_owner_is_own_role())]
    pub owner: String,
}

impl Default for InitdbSpec {
    fn default() -> Self {
        Self {
            database: default_app_name(),
            owner: default_app_name(),
        }
    }
}

/// A restore from object storage: the newest backup of the source cluster
/// that ends before the target, then its archived WAL up to the target
/// (the end of the archive when no target is set), then a promotion. The
/// new cluster archives to its own path, never to its source's.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::at_most_one_recovery_target())]
pub struct RecoverySpec {
    /// Where the source cluster's backups and WAL are: its
    /// `spec.backup.destination` (the credentials and CA Secrets are read
    /// in this cluster's namespace).
    pub source: ObjectStore,

    /// The source cluster's name.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// The source cluster's namespace; this cluster's when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,

    /// Recover up to this WAL position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 17))]
    #[x_kube(validation = rules::lsn())]
    pub target_lsn: Option<String>,

    /// Recover up to this restore point (`pg_create_restore_point`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub target_name: Option<String>,

    /// Recover up to this moment (RFC 3339, e.g. `2026-05-01T12:00:00Z`);
    /// to the end of the archived WAL when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = rules::rfc3339_time())]
    pub target_time: Option<String>,
}

/// What happens to volumes and backups when the cluster is deleted (R15).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeletionPolicy {
    /// Keep volumes and backups; they are labelled as retained.
    #[default]
    Retain,
    /// Delete volumes and backups with the cluster.
    Delete,
}

/// Certificates of the owner's issuer (`spec.certificates`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificatesSpec {
    /// A Secret in the cluster's namespace holding PostgreSQL's server
    /// certificate, as cert-manager writes one: `tls.crt` (the
    /// certificate, with its chain), `tls.key` and `ca.crt` (the authority
    /// clients verify it with). PostgreSQL serves it to every client in
    /// place of the certificate the cluster's authority issues, and
    /// reloads it when it is renewed, with no restart. It must carry the
    /// name `<cluster>-rw` (instances verify one another by it) besides
    /// the names clients connect to. Replication still logs in with the
    /// cluster's own client certificate, and the instance API keeps the
    /// cluster's own server certificate.
    #[schemars(length(max = 253))]
    #[x_kube(validation = rules::object_name())]
    pub server_secret: String,
}

/// Who may reach the cluster's pods over the network
/// (`spec.networkPolicy`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Who may connect to PostgreSQL (port 5432), in NetworkPolicy's terms
    /// (a pod selector, a namespace selector, both, or an address block).
    /// The cluster's own instances always may (replication). Empty: no
    /// client from the network. The instance API (port 8000) stays open
    /// to all: probes, the operator and `kubectl tusk plan` reach it, and
    /// its `/status` answers only the cluster's authority.
    #[serde(default)]
    #[schemars(extend("maxItems" = 64))]
    pub clients: Vec<NetworkPolicyPeer>,
}

/// Additions to the pods the operator creates (R14: the documented
/// extension point; anything else about the pods is the operator's).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    /// Extra labels on every instance pod. Keys under `tusk.dev/` are the
    /// operator's and cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = rules::no_operator_keys("labels"))]
    pub labels: BTreeMap<String, String>,

    /// Extra annotations on every instance pod. Keys under `tusk.dev/` are
    /// the operator's and cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = rules::no_operator_keys("annotations"))]
    pub annotations: BTreeMap<String, String>,

    /// Node labels an instance pod's node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations for node taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Scheduling affinity. When omitted, the operator prefers to spread
    /// instances over nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// PriorityClass of the instance pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// How instances spread over topology domains (zones, say). When
    /// empty, the only spreading is the default affinity's preference for
    /// different nodes. Changing it replaces the pods, one at a time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 8))]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,

    /// Secrets holding the credentials of a private registry, for pulling
    /// the PostgreSQL and operator images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 8))]
    pub image_pull_secrets: Vec<LocalObjectReference>,
}

fn one() -> i32 {
    1
}
fn yes() -> bool {
    true
}
fn default_failover_delay() -> i32 {
    5
}
fn default_promotion_timeout() -> i32 {
    30
}
fn default_backup_max_age_hours() -> i32 {
    24
}
fn default_retention_days() -> i32 {
    30
}
fn default_app_name() -> String {
    tusk_postgres::roles::DEFAULT_APP.to_owned()
}
