//! `tusk instance rehearse`: a restore rehearsal (R28), run in a pod of its
//! own on a scratch volume (see `tusk_api::rehearsal`).
//!
//! The newest base backup in the cluster's repository is restored with
//! pgBackRest (which checks every file against the checksum it recorded),
//! PostgreSQL replays the archived WAL on its unix socket only (no
//! network, no archiving: the rehearsal never serves nor writes to the
//! repository) until the archive ends and it promotes, and the restored
//! data is checked: the backup's sentinel row ([`crate::sentinel`]) and
//! `pg_amcheck` on every database. The first failing check ends the
//! rehearsal and is named in the outcome; the restored copy is removed.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tusk_api::rehearsal::{Check, Outcome};
use tusk_api::time::kube_time;
use tusk_api::v1alpha1::RecoveryPoint;
use tusk_postgres::pgbackrest::{self, BackupInfo, RecoveryTarget};

use crate::archiving::{self, Invocation};
use crate::bootstrap::{RESTORE_TIMEOUT, fresh_staging, start_private, wait_promoted};
use crate::context::InstanceContext;
use crate::datadir;
use crate::desired::{DesiredState, RestoreSource};
use crate::postgres::config::ReplicationRole;
use crate::{sentinel, tools};

/// The longest reading the repository's list of backups may take.
const INFO_TIMEOUT: Duration = Duration::from_secs(120);

/// A check that failed, and why.
pub(crate) type Failure = (Check, String);

/// What the rehearsal learned on its way, reported whatever the outcome.
#[derive(Default)]
struct Found {
    backup: Option<BackupInfo>,
    recovery_point: Option<RecoveryPoint>,
}

/// Rehearses a restore of this cluster's newest backup; never fails, the
/// outcome says what happened.
pub async fn rehearse(ctx: &InstanceContext, desired: &DesiredState) -> Outcome {
    let started = Instant::now();
    let mut found = Found::default();
    let result = restore_and_check(ctx, desired, &mut found).await;
    if let Err(error) = datadir::remove_dir(&ctx.settings.staging_dir()) {
        tracing::warn!(%error, "cannot remove the rehearsal's restored copy");
    }
    let (failed_check, message) = match result {
        Ok(summary) => (None, summary),
        Err((check, why)) => (Some(check), why),
    };
    let backup = found.backup.as_ref();
    Outcome {
        backup_id: backup.map(|b| b.label.clone()),
        backup: backup.and_then(|b| b.annotation.clone()),
        failed_check,
        message,
        recovery_point: found.recovery_point,
        duration_seconds: started.elapsed().as_secs_f64(),
    }
}

async fn restore_and_check(
    ctx: &InstanceContext,
    desired: &DesiredState,
    found: &mut Found,
) -> Result<String, Failure> {
    let (staging, annotation) = restore_newest(ctx, desired, &mut found.backup).await?;
    ctx.write_config(&staging, desired, ReplicationRole::Primary)
        .map_err(|e| (Check::Recovery, e.to_string()))?;
    let postmaster = start_private(ctx, &staging, &ctx.pgbackrest_env())
        .map_err(|e| (Check::Recovery, e.to_string()))?;
    let checked = check_recovered(
        ctx,
        &staging,
        postmaster.pid(),
        annotation.as_deref(),
        found,
    )
    .await;
    postmaster.stop(ctx.settings.stop_timeout).await;
    checked
}

/// Restores the newest backup of this cluster's repository into a fresh
/// staging directory ([`crate::settings::Settings::staging_dir`]), set to
/// recover to the end of the archived WAL once started (with
/// [`InstanceContext::pgbackrest_env`]); returns it with the backup's
/// annotation, and records the backup in `backup`. Shared by the
/// rehearsal and the major upgrade's pre-check.
pub(crate) async fn restore_newest(
    ctx: &InstanceContext,
    desired: &DesiredState,
    backup: &mut Option<BackupInfo>,
) -> Result<(std::path::PathBuf, Option<String>), Failure> {
    let repository = desired.archiving.clone().ok_or((
        Check::Backup,
        "the cluster archives nowhere (spec.backup with walArchiving): there is nothing to restore"
            .to_owned(),
    ))?;
    let source = RestoreSource {
        repository,
        namespace: ctx.settings.namespace.clone(),
        cluster: ctx.settings.cluster_name.clone(),
        target: RecoveryTarget::Latest,
    };
    let config = ctx
        .write_restore_config(&source)
        .map_err(|e| (Check::Restore, e.to_string()))?;
    let invocation = Invocation {
        config: &config,
        stanza: &source.cluster,
        env: ctx.pgbackrest_env(),
    };
    let newest = newest_backup(ctx, &invocation).await?;
    let label = newest.label.clone();
    let annotation = newest.annotation.clone();
    *backup = Some(newest);
    let staging = restore(ctx, &invocation, &label).await?;
    Ok((staging, annotation))
}

/// The newest backup the repository lists.
async fn newest_backup(
    ctx: &InstanceContext,
    invocation: &Invocation<'_>,
) -> Result<BackupInfo, Failure> {
    let json = archiving::run_with(ctx, invocation, &["info", "--output=json"], INFO_TIMEOUT)
        .await
        .map_err(|e| (Check::Backup, e))?;
    let backups =
        pgbackrest::parse_info(&json, invocation.stanza).map_err(|e| (Check::Backup, e))?;
    backups.into_iter().next_back().ok_or((
        Check::Backup,
        format!("the repository lists no backup of {}", invocation.stanza),
    ))
}

/// Restores the backup `label` into a fresh staging directory, set to
/// recover to the end of the archived WAL.
async fn restore(
    ctx: &InstanceContext,
    invocation: &Invocation<'_>,
    label: &str,
) -> Result<std::path::PathBuf, Failure> {
    let staging = fresh_staging(ctx).map_err(|e| (Check::Restore, e.to_string()))?;
    let mut args =
        pgbackrest::restore_args(&staging.display().to_string(), &RecoveryTarget::Latest);
    args.push(format!("--set={label}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    archiving::run_with(ctx, invocation, &args, RESTORE_TIMEOUT)
        .await
        .map_err(|e| (Check::Restore, e))?;
    Ok(staging)
}

/// The checks on the running restored copy: recovery ended, the
/// sentinel is there, `pg_amcheck` is clean.
async fn check_recovered(
    ctx: &InstanceContext,
    staging: &Path,
    pid: i32,
    backup: Option<&str>,
    found: &mut Found,
) -> Result<String, Failure> {
    let client = wait_promoted(ctx, pid)
        .await
        .map_err(|e| (Check::Recovery, e))?;
    found.recovery_point = recovery_point(&client).await;
    let mut passed = vec!["restored", "recovered to the end of the archived WAL"];
    match backup {
        Some(name) => {
            sentinel::check(&client, name)
                .await
                .map_err(|e| (Check::Sentinel, e))?;
            passed.push("sentinel present");
        }
        None => passed.push("no sentinel (a backup not taken by the operator)"),
    }
    drop(client);
    amcheck(ctx, staging).await?;
    passed.push("pg_amcheck clean");
    Ok(passed.join("; "))
}

/// Where recovery ended: the position the new timeline forked at (the
/// last line of the newest timeline history file) and the commit time of
/// the last transaction replayed.
async fn recovery_point(client: &tokio_postgres::Client) -> Option<RecoveryPoint> {
    let row = client
        .query_one(
            "SELECT (SELECT pg_read_file('pg_wal/' || name) FROM pg_ls_waldir()
                     WHERE name LIKE '%.history' ORDER BY name DESC LIMIT 1),
                    to_char(pg_last_xact_replay_timestamp() AT TIME ZONE 'UTC',
                            'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
            &[],
        )
        .await
        .ok()?;
    let history: Option<String> = row.get(0);
    let time: Option<String> = row.get(1);
    Some(RecoveryPoint {
        lsn: fork_point(history.as_deref()?)?,
        time: time
            .and_then(|t| t.parse::<Timestamp>().ok())
            .map(kube_time),
    })
}

/// The fork position in a timeline history file: the second field of
/// its last entry (`1\t0/5000148\tno recovery target specified`).
fn fork_point(history: &str) -> Option<String> {
    history
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty() && !line.starts_with('#'))?
        .split_whitespace()
        .nth(1)
        .map(str::to_owned)
}

/// `pg_amcheck` on every database (installing `amcheck` in the copy where
/// it is missing), over the local socket.
async fn amcheck(ctx: &InstanceContext, staging: &Path) -> Result<(), Failure> {
    let socket = ctx.settings.run_dir.display().to_string();
    let port = ctx.settings.postgres_port.to_string();
    let user = ctx.settings.credentials.superuser.username.clone();
    let args = [
        "--all",
        "--install-missing",
        "--heapallindexed",
        "--host",
        &socket,
        "--port",
        &port,
        "--username",
        &user,
        "--no-password",
    ];
    tools::run(ctx, "pg_amcheck", args).await.map_err(|e| {
        tracing::warn!(data = %staging.display(), error = %e, "pg_amcheck found problems");
        (Check::Amcheck, e.to_string())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fork_point_is_the_last_entry_of_the_history() {
        let history = "1\t0/3000000\tno recovery target specified\n\n2\t0/5000148\tno recovery target specified\n";
        assert_eq!(fork_point(history).as_deref(), Some("0/5000148"));
        assert_eq!(fork_point(""), None);
    }
}
