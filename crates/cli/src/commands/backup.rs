//! `tusk backup CLUSTER`: creates a PostgresBackup of the cluster and
//! follows it, one line per change, until it completes or fails.
//!
//! The backup is named `<cluster>-<YYYYMMDDhhmmss>` (UTC, now) unless
//! `--name` gives one. Exit codes: 0 completed (or created, with
//! `--wait 0`), 1 failed, 2 the command could not run or the wait ended
//! first (the backup goes on).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use tusk_api::v1alpha1::{
    BackupPhase, BackupTarget, BackupType, PostgresBackup, PostgresBackupSpec, PostgresBackupStatus,
};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// full, differential or incremental.
    #[arg(long = "type", value_enum, default_value = "full")]
    pub backup_type: Kind,
    /// Take it from the primary even when a replica could.
    #[arg(long)]
    pub primary: bool,
    /// The PostgresBackup's name [default: <cluster>-<YYYYMMDDhhmmss>].
    #[arg(long)]
    pub name: Option<String>,
    /// Seconds to follow the backup (0: create it and return).
    #[arg(long, default_value_t = 3600)]
    pub wait: u64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Kind {
    Full,
    Differential,
    Incremental,
}

impl From<Kind> for BackupType {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Full => BackupType::Full,
            Kind::Differential => BackupType::Differential,
            Kind::Incremental => BackupType::Incremental,
        }
    }
}

/// How often the backup is read again while it runs.
const POLL: Duration = Duration::from_secs(1);

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(backup(args))
}

/// The default name: the cluster's, and when.
pub fn default_name(cluster: &str, now: Timestamp) -> String {
    format!("{cluster}-{}", now.strftime("%Y%m%d%H%M%S"))
}

/// One line saying where a backup is.
pub fn describe(name: &str, status: Option<&PostgresBackupStatus>) -> String {
    let Some(status) = status.filter(|s| s.phase.is_some()) else {
        return format!("{name}: waiting for the operator");
    };
    let on = status
        .instance
        .as_deref()
        .map_or_else(String::new, |i| format!(" on {i}"));
    match status.phase {
        Some(BackupPhase::Completed) => format!(
            "{name}: Completed{on}: backup {} from {} to {}, {} stored at {}",
            status.backup_id.as_deref().unwrap_or("-"),
            status.begin_lsn.as_deref().unwrap_or("-"),
            status.end_lsn.as_deref().unwrap_or("-"),
            status
                .size_bytes
                .map_or_else(|| "? bytes".to_owned(), |b| format!("{b} bytes")),
            status.location.as_deref().unwrap_or("-"),
        ),
        Some(BackupPhase::Failed) => format!(
            "{name}: Failed{on}: {}",
            status.error.as_deref().unwrap_or("no message")
        ),
        Some(phase) => format!("{name}: {phase:?}{on}"),
        None => format!("{name}: waiting for the operator"),
    }
}

async fn backup(args: &Args) -> Result<ExitCode, CommandError> {
    let target = Target::connect(args.at.namespace.as_deref()).await?;
    let cluster = &args.at.cluster;
    target.cluster(cluster).await?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(cluster, Timestamp::now()));
    let api = target.api::<PostgresBackup>();
    let mut request = PostgresBackup::new(
        &name,
        PostgresBackupSpec {
            cluster: cluster.clone(),
            target: if args.primary {
                BackupTarget::Primary
            } else {
                BackupTarget::PreferReplica
            },
            backup_type: args.backup_type.into(),
        },
    );
    request.metadata.namespace = Some(target.namespace.clone());
    api.create(&PostParams::default(), &request)
        .await
        .map_err(kubernetes)?;
    outln!("postgresbackup/{name} created in {}", target.namespace)?;
    if args.wait == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = Instant::now() + Duration::from_secs(args.wait);
    let mut said = String::new();
    while Instant::now() < deadline {
        let backup = api.get(&name).await.map_err(kubernetes)?;
        let line = describe(&name, backup.status.as_ref());
        if line != said {
            outln!("{line}")?;
            said = line;
        }
        match backup.status.and_then(|s| s.phase) {
            Some(BackupPhase::Completed) => return Ok(ExitCode::SUCCESS),
            Some(BackupPhase::Failed) => return Ok(ExitCode::from(1)),
            _ => tokio::time::sleep(POLL).await,
        }
    }
    eprintln!(
        "{name} has not finished after {} s; it goes on: kubectl get pgb {name} -n {}",
        args.wait, target.namespace
    );
    Ok(ExitCode::from(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_is_named_after_its_cluster_and_the_time() {
        let now: Timestamp = "2026-12-04T17:05:09Z".parse().expect("time");
        assert_eq!(default_name("orders", now), "orders-20261204170509");
    }

    #[test]
    fn each_phase_reads_as_one_line() {
        assert_eq!(describe("b", None), "b: waiting for the operator");
        let running = PostgresBackupStatus {
            phase: Some(BackupPhase::Running),
            instance: Some("orders-1".into()),
            ..PostgresBackupStatus::default()
        };
        assert_eq!(describe("b", Some(&running)), "b: Running on orders-1");
        let done = PostgresBackupStatus {
            phase: Some(BackupPhase::Completed),
            backup_id: Some("20261204-170510F".into()),
            begin_lsn: Some("0/4000028".into()),
            end_lsn: Some("0/4000138".into()),
            size_bytes: Some(4_000_000),
            location: Some("s3://b/p".into()),
            ..running.clone()
        };
        assert_eq!(
            describe("b", Some(&done)),
            "b: Completed on orders-1: backup 20261204-170510F from 0/4000028 to 0/4000138, 4000000 bytes stored at s3://b/p"
        );
        let failed = PostgresBackupStatus {
            phase: Some(BackupPhase::Failed),
            error: Some("spec.backup is not set".into()),
            instance: None,
            ..PostgresBackupStatus::default()
        };
        assert_eq!(
            describe("b", Some(&failed)),
            "b: Failed: spec.backup is not set"
        );
    }
}
