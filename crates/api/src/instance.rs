//! The instance manager's HTTP API: what `GET /status` on every PostgreSQL
//! pod returns. The operator polls it; the instance manager serves it.
//!
//! Pure serde types. WAL positions are PostgreSQL's text form (`0/3000148`)
//! so that a person reading the JSON sees what `psql` would show.

use serde::{Deserialize, Serialize};

/// Port of the instance manager's HTTP API on the pod IP.
pub const DEFAULT_HTTP_PORT: u16 = 8000;

/// Path of the status endpoint.
pub const STATUS_PATH: &str = "/status";
/// Path of the liveness endpoint.
pub const HEALTHZ_PATH: &str = "/healthz";
/// Path of the readiness endpoint.
pub const READYZ_PATH: &str = "/readyz";
/// Path of the Prometheus metrics endpoint.
pub const METRICS_PATH: &str = "/metrics";

/// Settings whose value on a hot standby must be at least its primary's
/// (PostgreSQL's "Hot Standby" requirements): a standby with less pauses
/// replay.
pub const STANDBY_MINIMUMS: [&str; 5] = [
    "max_connections",
    "max_locks_per_transaction",
    "max_prepared_transactions",
    "max_wal_senders",
    "max_worker_processes",
];

/// The header carrying the token `/status` requires when the API is served
/// over HTTPS ([`crate::contract::InstanceEnv::API_TLS`]): a JWT (ES256)
/// signed with the cluster's token key (`<cluster>-api-token-key`, see
/// [`crate::contract::TlsSecret::TokenKey`]), not the certificate
/// authority's, and checked against the token key's public half every
/// instance mounts. Not `Authorization`:
/// kube-apiserver removes that header from a request it authenticated, and
/// `tusk plan` reaches `/status` through the API server's pod proxy.
pub const TOKEN_HEADER: &str = "x-tusk-token";

/// How long a token is valid after it is signed, in seconds.
pub const TOKEN_LIFETIME_SECONDS: u64 = 120;

/// The audience a token for `cluster` in `namespace` names: a token for
/// one cluster is refused by another even under the same authority.
pub fn token_audience(namespace: &str, cluster: &str) -> String {
    format!("tusk-instance-api:{namespace}/{cluster}")
}

/// What a token says (RFC 7519 claim names).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    /// Who signed it (`tusk-operator`, or `tusk-plan` for a preview).
    pub sub: String,
    /// [`token_audience`].
    pub aud: String,
    /// Signed at, seconds since the epoch.
    pub iat: u64,
    /// Valid until, seconds since the epoch.
    pub exp: u64,
}

impl TokenClaims {
    /// Claims for `subject`, valid [`TOKEN_LIFETIME_SECONDS`] from `now`
    /// (seconds since the epoch).
    pub fn new(subject: &str, namespace: &str, cluster: &str, now: u64) -> Self {
        TokenClaims {
            sub: subject.to_owned(),
            aud: token_audience(namespace, cluster),
            iat: now,
            exp: now.saturating_add(TOKEN_LIFETIME_SECONDS),
        }
    }
}

/// What an instance is doing right now, as its manager sees it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum InstanceRole {
    /// Read-write primary.
    Primary,
    /// Hot standby streaming (or trying to stream) from the primary.
    Replica,
    /// PostgreSQL is not running (bootstrapping, fenced, restarting or
    /// waiting for a primary to clone from).
    Stopped,
}

impl InstanceRole {
    /// The role as written in JSON and in `status.instances[].role`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Replica => "replica",
            Self::Stopped => "stopped",
        }
    }

    /// The role [`Self::as_str`] wrote, `None` for anything else (such as
    /// `unknown`, the role of an instance that did not answer).
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Primary, Self::Replica, Self::Stopped]
            .into_iter()
            .find(|role| role.as_str() == text)
    }
}

/// Why PostgreSQL is in its current lifecycle state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum InstancePhase {
    /// Creating the data directory (initdb or a clone of the primary).
    Bootstrapping,
    /// No data yet and no primary known to clone from.
    WaitingForPrimary,
    /// PostgreSQL is starting or running.
    Running,
    /// Promoting this standby to primary.
    Promoting,
    /// Turning a former primary into a standby of the new one (pg_rewind or
    /// a fresh clone).
    Rejoining,
    /// Restarting PostgreSQL to apply settings that need a restart.
    Restarting,
    /// PostgreSQL exited unexpectedly and is restarted after a back-off.
    CrashRecovery,
    /// Stopped on purpose: the instance is fenced.
    Fenced,
    /// The target primary without the primary lease (never acquired, or
    /// not renewed in time): PostgreSQL is kept stopped until the lease is
    /// held (see `tusk_api::primacy`).
    WaitingForLease,
    /// The manager is shutting down.
    ShuttingDown,
}

/// `GET /status`: the instance as observed by its manager. Holds no
/// credentials and no row data.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceReport {
    /// Instance (pod) name.
    pub name: String,
    /// Current role.
    pub role: InstanceRole,
    /// Lifecycle phase of the manager.
    pub phase: InstancePhase,
    /// True when PostgreSQL accepts connections (and a standby is streaming).
    pub ready: bool,
    /// True when the instance is fenced and PostgreSQL is kept stopped.
    pub fenced: bool,
    /// The instance the manager was last told should be primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_primary: Option<String>,
    /// Server version, e.g. `15.8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_version: Option<String>,
    /// Database system identifier; equal on every member of one cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_identifier: Option<String>,
    /// Timeline this instance writes (primary) or replays (standby).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<u32>,
    /// Current WAL write position (primary only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_lsn: Option<String>,
    /// Last WAL position received and flushed from the primary (standby only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_lsn: Option<String>,
    /// Last WAL position replayed (standby only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_lsn: Option<String>,
    /// Received but not yet replayed WAL, in bytes (standby only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_bytes: Option<u64>,
    /// Seconds since the last replayed transaction was committed on the
    /// primary; 0 when everything received is replayed (standby only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<f64>,
    /// Commit time of the last transaction a standby replayed, RFC 3339
    /// (standby only; absent before it replayed any). With `replayedLsn`
    /// it is the recovery point a promotion would start from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_commit_time: Option<String>,
    /// True when a standby's WAL receiver is streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Host the standby streams from (an IP address, never a password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Settings changed in the configuration that take effect only after a
    /// restart. In a cluster the operator replaces the pods one at a time
    /// to apply them (a rolling restart); a manager run on its own
    /// restarts PostgreSQL itself.
    #[serde(default)]
    pub pending_restart: Vec<String>,
    /// Of [`Self::pending_restart`], the settings a standby must hold at
    /// least at its primary's value ([`STANDBY_MINIMUMS`]) that the pending
    /// change lowers: lowered on a standby first, the standby could not
    /// replay its primary's WAL, so the primary restarts first. A setting
    /// removed from the configuration goes back to PostgreSQL's default,
    /// and lowers it when that is below the running value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_restart_lowered: Vec<String>,
    /// Standby minimums ([`STANDBY_MINIMUMS`]) this standby runs above
    /// their declared value, held at the value its primary last ran with
    /// (its control file's) until it replays the primary's lowered one;
    /// then the declared value is written and reported pending a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_minimums: Vec<String>,
    /// Standbys connected to this primary.
    #[serde(default)]
    pub standbys: Vec<StandbyReport>,
    /// Times PostgreSQL exited unexpectedly since the manager started.
    #[serde(default)]
    pub crash_count: u32,
    /// The last error the manager met while converging, if it is still
    /// failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Parts of the cluster's declaration the manager cannot read (a
    /// malformed fencing annotation, an impossible synchronous number);
    /// each took its safe value until it is fixed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desired_state_errors: Vec<String>,
    /// A former data directory kept on the volume after a fresh clone
    /// replaced it (it may hold writes the primary never received); kept
    /// until deleted by hand, and while it is there no further clone
    /// replaces this instance's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_copy: Option<String>,
    /// Where the WAL that rewinds of this instance discarded is kept, one
    /// folder per rewind (it may hold writes the primary never received);
    /// kept until deleted by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_wal: Option<String>,
    /// Continuous WAL archiving, when the cluster archives WAL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archiving: Option<ArchivingReport>,
    /// False when the manager has not reached the API server within the
    /// primary lease's fence time: it could not take the lease over, so
    /// the operator does not choose it to replace a primary. Absent when
    /// the manager runs without the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_reachable: Option<bool>,
    /// The base backup this instance was last asked to take
    /// (`status.backup.running`), and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupReport>,
    /// pgBackRest's TLS server, while it runs with a certificate naming
    /// this pod's address: a standby backs up this primary through it.
    /// Absent when it does not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_server: Option<crate::v1alpha1::BackupServer>,
    /// The declared roles (`spec.roles`) as this primary last converged
    /// them; absent on a standby and before the first pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<crate::v1alpha1::RoleStatus>>,
}

/// One base backup as the instance taking it reports it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupReport {
    /// The PostgresBackup's name.
    pub name: String,
    /// What its `status` becomes: phase, pgBackRest's label, LSNs, size,
    /// error.
    pub status: crate::v1alpha1::PostgresBackupStatus,
}

/// Continuous WAL archiving as the instance sees it: whether its stanza
/// exists in the repository and, on a primary, what PostgreSQL's archiver
/// reports (`pg_stat_archiver`). Times are RFC 3339.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ArchivingReport {
    /// The pgBackRest stanza (the cluster's name).
    pub stanza: String,
    /// True once `stanza-create` succeeded from this instance (only a
    /// primary creates it).
    pub stanza_created: bool,
    /// True when archiving is failing now: the stanza cannot be created,
    /// or the archiver's last attempt failed.
    pub failing: bool,
    /// Newest WAL segment archived, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_wal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_archived_time: Option<String>,
    /// Newest WAL segment whose archiving failed, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_wal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_time: Option<String>,
    /// Segments archived and failures since statistics were reset.
    #[serde(default)]
    pub archived_count: i64,
    #[serde(default)]
    pub failed_count: i64,
    /// Finished segments waiting in `pg_wal` to be archived: they stay on
    /// the volume until archived, so a number that keeps growing is disk
    /// filling up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_segments: Option<i64>,
    /// Why archiving fails, in pgBackRest's words, when it is failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A standby as its primary sees it (`pg_stat_replication`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StandbyReport {
    /// The standby's `application_name`: its instance name.
    pub name: String,
    /// Its address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_address: Option<String>,
    /// `streaming`, `catchup`, `backup`, ...
    pub state: String,
    /// `async`, `potential`, `sync` or `quorum`.
    pub sync_state: String,
    /// WAL sent to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_lsn: Option<String>,
    /// WAL it has flushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_lsn: Option<String>,
    /// WAL it has replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_lsn: Option<String>,
    /// Bytes between the primary's current position and what it replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_lag_bytes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_reads_back_as_written_and_unknown_is_no_role() {
        for role in [
            InstanceRole::Primary,
            InstanceRole::Replica,
            InstanceRole::Stopped,
        ] {
            let json = serde_json::to_value(role).expect("serializes");
            assert_eq!(json, serde_json::json!(role.as_str()));
            assert_eq!(InstanceRole::parse(role.as_str()), Some(role));
        }
        assert_eq!(InstanceRole::parse("unknown"), None);
    }

    #[test]
    fn report_uses_camel_case_and_round_trips() {
        let report = InstanceReport {
            name: "db-1".into(),
            role: InstanceRole::Replica,
            phase: InstancePhase::Running,
            ready: true,
            fenced: false,
            target_primary: Some("db-2".into()),
            postgres_version: Some("15.8".into()),
            system_identifier: Some("7300000000000000000".into()),
            timeline: Some(2),
            current_lsn: None,
            received_lsn: Some("0/3000148".into()),
            replayed_lsn: Some("0/3000148".into()),
            lag_bytes: Some(0),
            lag_seconds: Some(0.0),
            replayed_commit_time: None,
            streaming: Some(true),
            upstream: Some("10.0.0.2".into()),
            pending_restart: vec![],
            pending_restart_lowered: vec![],
            held_minimums: vec![],
            standbys: vec![],
            crash_count: 0,
            last_error: None,
            desired_state_errors: vec![],
            kept_copy: None,
            kept_wal: None,
            archiving: None,
            api_server_reachable: None,
            backup: None,
            backup_server: None,
            roles: None,
        };
        let json = serde_json::to_value(&report).expect("serialises");
        assert_eq!(json["role"], "replica");
        assert_eq!(json["receivedLsn"], "0/3000148");
        assert_eq!(json["targetPrimary"], "db-2");
        assert!(json.get("currentLsn").is_none());
        let back: InstanceReport = serde_json::from_value(json).expect("deserialises");
        assert_eq!(back, report);
    }
}
