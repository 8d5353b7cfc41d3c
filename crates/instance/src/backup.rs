//! Base backups with pgBackRest, one at a time, as the operator assigns
//! them (`status.backup.running` naming this instance).
//!
//! The backup runs as a task beside the convergence loop (it may take
//! hours); its progress and outcome are kept in the manager's state and
//! reported on `/status` (`backup`), from which the operator records them
//! in the PostgresBackup's status.
//!
//! Just before a backup starts, its sentinel row is written
//! ([`crate::sentinel`]): a restore rehearsal of the backup checks it.
//!
//! Each backup carries the PostgresBackup's name as a pgBackRest
//! annotation. Before taking one, the repository is asked whether a
//! backup with that annotation exists already (a manager restarted after
//! the backup finished): it is reported instead of taking a second one.
//!
//! pgBackRest takes a backup from a standby only with a connection to the
//! primary's host (its TLS server), which the pods do not run yet: the
//! primary takes every backup.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::task::JoinHandle;
use tusk_api::instance::BackupReport;
use tusk_api::time::kube_time;
use tusk_api::v1alpha1::{BackupAssignment, BackupPhase, PostgresBackupStatus};
use tusk_postgres::pgbackrest::{self, BackupInfo, Repository};

use crate::context::InstanceContext;
use crate::desired::DesiredState;
use crate::state::SharedState;
use crate::task::take_finished;
use crate::{archiving, sentinel, sql};

/// The longest a base backup may run before it is stopped and failed.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(12 * 3600);
/// The longest writing the sentinel may take.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest reading the repository's list of backups may take.
const INFO_TIMEOUT: Duration = Duration::from_secs(120);

/// The backup being taken, if any.
#[derive(Default)]
pub struct Backups {
    running: Option<(String, JoinHandle<PostgresBackupStatus>)>,
}

impl Backups {
    /// One look, from the convergence loop: collects a finished backup
    /// and starts the assigned one when this instance runs as primary and
    /// the stanza exists. Never waits.
    pub fn converge(
        &mut self,
        ctx: &InstanceContext,
        desired: &DesiredState,
        state: &SharedState,
        running_primary: bool,
    ) {
        if let Some((name, outcome)) = take_finished(&mut self.running, "backup") {
            let status = outcome.unwrap_or_else(|error| failed(ctx, error));
            tracing::info!(backup = %name, phase = ?status.phase, id = ?status.backup_id, error = ?status.error, "base backup finished");
            state.lock().backup = Some(BackupReport { name, status });
        }
        let (Some(request), Some(repository)) = (&desired.backup, &desired.archiving) else {
            return;
        };
        let known = state
            .lock()
            .backup
            .as_ref()
            .is_some_and(|b| b.name == request.backup);
        if known || self.running.is_some() {
            return;
        }
        let me = &ctx.settings.pod_name;
        if desired.target_primary.as_deref() != Some(me.as_str()) {
            let message =
                format!("{me} is not the primary; pgBackRest takes backups from the primary");
            state.lock().backup = Some(BackupReport {
                name: request.backup.clone(),
                status: failed(ctx, message),
            });
            return;
        }
        let stanza_ready = state
            .lock()
            .archiving
            .as_ref()
            .is_some_and(|a| a.stanza_created);
        if !running_primary || !stanza_ready {
            return;
        }
        tracing::info!(backup = %request.backup, kind = request.backup_type.pgbackrest(), "taking a base backup");
        state.lock().backup = Some(BackupReport {
            name: request.backup.clone(),
            status: PostgresBackupStatus {
                phase: Some(BackupPhase::Running),
                started_at: Some(kube_time(Timestamp::now())),
                instance: Some(me.clone()),
                ..PostgresBackupStatus::default()
            },
        });
        let (ctx, request, repository) = (ctx.clone(), request.clone(), repository.clone());
        let name = request.backup.clone();
        let task = tokio::spawn(async move { take(&ctx, &request, &repository).await });
        self.running = Some((name, task));
    }
}

/// Takes the backup `request` asks for, unless the repository holds it
/// already; its record.
async fn take(
    ctx: &InstanceContext,
    request: &BackupAssignment,
    repository: &Repository,
) -> PostgresBackupStatus {
    let record = |info: BackupInfo| completed(ctx, repository, info);
    match find(ctx, &request.backup).await {
        Ok(Some(info)) => return record(info),
        Ok(None) => {}
        Err(error) => return failed(ctx, error),
    }
    if let Err(error) = write_sentinel(ctx, &request.backup).await {
        return failed(ctx, error);
    }
    let args = pgbackrest::backup_args(request.backup_type.pgbackrest(), &request.backup);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if let Err(error) = archiving::run(ctx, &args, BACKUP_TIMEOUT).await {
        return failed(ctx, error);
    }
    match find(ctx, &request.backup).await {
        Ok(Some(info)) => record(info),
        Ok(None) => failed(
            ctx,
            "pgbackrest backup succeeded but the repository lists no backup for it".to_owned(),
        ),
        Err(error) => failed(ctx, error),
    }
}

/// Writes the sentinel of backup `name` ([`sentinel`]), which restore
/// rehearsals look for.
async fn write_sentinel(ctx: &InstanceContext, name: &str) -> Result<(), String> {
    let client = sql::connect(&ctx.local_target(), "postgres")
        .await
        .map_err(|e| format!("cannot write the backup sentinel: {e}"))?;
    let written = tokio::time::timeout(SENTINEL_TIMEOUT, sentinel::write(&client, name)).await;
    match written {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot write the backup sentinel: {e}")),
        Err(_) => Err(format!(
            "cannot write the backup sentinel within {SENTINEL_TIMEOUT:?}"
        )),
    }
}

/// The backup annotated with `name` in the repository, if there is one.
async fn find(ctx: &InstanceContext, name: &str) -> Result<Option<BackupInfo>, String> {
    let json = archiving::run(ctx, &["info", "--output=json"], INFO_TIMEOUT).await?;
    let backups = pgbackrest::parse_info(&json, &ctx.settings.cluster_name)?;
    Ok(backups
        .into_iter()
        .rev()
        .find(|b| b.annotation.as_deref() == Some(name)))
}

fn completed(
    ctx: &InstanceContext,
    repository: &Repository,
    info: BackupInfo,
) -> PostgresBackupStatus {
    let time = |seconds: i64| Timestamp::from_second(seconds).ok().map(kube_time);
    let stanza = ctx.stanza(repository);
    PostgresBackupStatus {
        phase: Some(BackupPhase::Completed),
        started_at: time(info.started),
        completed_at: time(info.stopped),
        timeline: info.timeline(),
        location: Some(repository.url_of(
            &ctx.settings.namespace,
            &ctx.settings.cluster_name,
            &format!("backup/{}/{}", stanza.name, info.label),
        )),
        size_bytes: info.repository_bytes,
        instance: Some(ctx.settings.pod_name.clone()),
        error: info
            .error
            .then(|| "pgBackRest found page checksum errors while copying".to_owned()),
        backup_id: Some(info.label),
        begin_lsn: info.begin_lsn,
        end_lsn: info.end_lsn,
    }
}

fn failed(ctx: &InstanceContext, error: String) -> PostgresBackupStatus {
    PostgresBackupStatus {
        phase: Some(BackupPhase::Failed),
        completed_at: Some(kube_time(Timestamp::now())),
        instance: Some(ctx.settings.pod_name.clone()),
        error: Some(error),
        ..PostgresBackupStatus::default()
    }
}
