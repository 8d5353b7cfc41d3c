//! Label and annotation keys: the operator's part of object metadata.
//!
//! Everything under `tusk.dev/` is the operator's; users cannot set these
//! keys through `spec.podTemplate`.

/// Name of the cluster an object belongs to.
pub const CLUSTER: &str = "tusk.dev/cluster";
/// Name of the instance (pod and volume) an object belongs to.
pub const INSTANCE: &str = "tusk.dev/instance";
/// Role of an instance pod: `primary` or `replica`. Services select on it.
pub const ROLE: &str = "tusk.dev/role";
/// Uid of the cluster a volume was created for: a volume is the cluster's
/// only when this matches (a claim of the same name left by an earlier
/// cluster, or made by someone else, is never adopted).
pub const CLUSTER_UID: &str = "tusk.dev/cluster-uid";
/// Set on volumes kept after their cluster was deleted (`deletionPolicy: Retain`).
pub const RETAINED: &str = "tusk.dev/retained";
/// Name of the cluster whose restore rehearsal an object (its pod and
/// scratch volume) is for. Such objects carry no [`CLUSTER`] label: no
/// Service, budget or instance count ever selects them.
pub const REHEARSAL: &str = "tusk.dev/rehearsal-of";
/// Annotation on a cluster asking for a restore rehearsal now (any value;
/// removed once the rehearsal starts).
pub const REHEARSE: &str = "tusk.dev/rehearse";
/// On a major upgrade's pod: the cluster it upgrades (not
/// [`CLUSTER`], so no Service or budget selects it).
pub const UPGRADE_OF: &str = "tusk.dev/upgrade-of";
/// On a cluster: start the approved major upgrade to the version this
/// annotation names although no backup is recent enough
/// (`spec.upgrade.backupMaxAgeHours`). Naming the version keeps an old
/// override from approving a later upgrade; the override is recorded in
/// `status.upgrade.backupOverride`.
pub const UPGRADE_WITHOUT_BACKUP: &str = "tusk.dev/upgrade-without-backup";
/// Marks objects created and managed by the operator.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "tusk-operator";

/// The selector of a cluster's pods in label-selector text, as the scale
/// subresource reports it in `status.selector`.
pub fn cluster_selector(cluster: &str) -> String {
    format!("{CLUSTER}={cluster}")
}

/// Annotation on a cluster listing fenced instances (`*` for all): their
/// PostgreSQL is stopped and stays stopped until removed from the list.
pub const FENCED_INSTANCES: &str = "tusk.dev/fenced-instances";
/// Annotation on a cluster requesting a switchover to the named instance.
pub const PROMOTE: &str = "tusk.dev/promote";
/// Annotation on a cluster approving a failover that may lose data.
pub const APPROVE_DATA_LOSS: &str = "tusk.dev/approve-data-loss";
/// Annotation on a cluster letting a stuck deletion finish without cleanup.
pub const FORCE_DELETE: &str = "tusk.dev/force-delete";
/// Annotation on a cluster pausing its rolling update (`"true"`): no pod
/// is replaced and no switchover started for an update while it is set.
pub const PAUSE_ROLLOUT: &str = "tusk.dev/pause-rollout";
/// Annotation on an instance's pod: the fingerprint of the template it was
/// built from (`<spec>-<pod>`: the cluster's declared pod inputs, then the
/// whole pod), so the operator tells an outdated pod, and why, without
/// comparing fields the API server may have defaulted.
pub const POD_TEMPLATE: &str = "tusk.dev/pod-template";

/// Values of [`ROLE`].
pub mod role {
    /// The read-write instance.
    pub const PRIMARY: &str = "primary";
    /// A streaming standby.
    pub const REPLICA: &str = "replica";
}
