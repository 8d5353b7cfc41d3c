//! Base backups with pgBackRest, one at a time, as the operator assigns
//! them (`status.backup.running` naming an instance).
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
//! A backup assigned to a standby is taken there, through the primary's
//! pgBackRest TLS server ([`crate::backup_server`]): the primary writes
//! the sentinel when it sees the assignment, and the standby starts once
//! the sentinel has replicated to it (it then also has the WAL up to it).

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::task::JoinHandle;
use tusk_api::instance::BackupReport;
use tusk_api::time::kube_time;
use tusk_api::v1alpha1::{BackupAssignment, BackupPhase, BackupServer, PostgresBackupStatus};
use tusk_postgres::pgbackrest::{self, BackupInfo, PrimaryHost, Repository, TlsFiles};

use crate::context::InstanceContext;
use crate::desired::DesiredState;
use crate::state::SharedState;
use crate::task::take_finished;
use crate::{archiving, sentinel, sql};

/// The longest a base backup may run before it is stopped and failed.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(12 * 3600);
/// The longest writing the sentinel may take.
const SENTINEL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a standby waits for the primary's sentinel to replicate.
const SENTINEL_REPLICATION_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest reading the repository's list of backups may take.
const INFO_TIMEOUT: Duration = Duration::from_secs(120);

/// The backup being taken, if any.
#[derive(Default)]
pub struct Backups {
    running: Option<(String, JoinHandle<PostgresBackupStatus>)>,
    /// On a primary: the sentinel written for a standby's backup.
    sentinel_written: Option<String>,
    sentinel_writing: Option<(String, JoinHandle<Result<(), String>>)>,
}

/// Where this instance takes its backup from.
#[derive(Clone, Debug)]
enum Source {
    /// Its own PostgreSQL, as primary.
    Primary,
    /// As a standby of the primary at this host, through its TLS server.
    Standby(PrimaryHost, TlsFiles),
}

/// What the instance runs as now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    Primary,
    Standby,
    Nothing,
}

impl Backups {
    /// One look, from the convergence loop: collects a finished backup,
    /// starts the one assigned to this instance (on a primary once the
    /// stanza exists; on a standby through the primary's server the
    /// assignment names), and on a primary writes the sentinel of a
    /// backup a standby takes. Never waits.
    pub fn converge(
        &mut self,
        ctx: &InstanceContext,
        desired: &DesiredState,
        state: &SharedState,
        serving: Serving,
    ) {
        if let Some((name, outcome)) = take_finished(&mut self.running, "backup") {
            let status = outcome.unwrap_or_else(|error| failed(ctx, error));
            tracing::info!(backup = %name, phase = ?status.phase, id = ?status.backup_id, error = ?status.error, "base backup finished");
            state.lock().backup = Some(BackupReport { name, status });
        }
        let (Some(request), Some(repository)) = (&desired.backup, &desired.archiving) else {
            return;
        };
        let me = &ctx.settings.pod_name;
        if request.instance != *me {
            if serving == Serving::Primary {
                self.write_sentinel_for_standby(ctx, &request.backup);
            }
            return;
        }
        let known = state
            .lock()
            .backup
            .as_ref()
            .is_some_and(|b| b.name == request.backup);
        if known || self.running.is_some() {
            return;
        }
        let source = match source(ctx, desired, state, serving, request) {
            Ok(Some(source)) => source,
            Ok(None) => return,
            Err(message) => {
                state.lock().backup = Some(BackupReport {
                    name: request.backup.clone(),
                    status: failed(ctx, message),
                });
                return;
            }
        };
        tracing::info!(backup = %request.backup, kind = request.backup_type.pgbackrest(), from = ?source, "taking a base backup");
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
        let task = tokio::spawn(async move { take(&ctx, &request, &repository, &source).await });
        self.running = Some((name, task));
    }

    /// On the primary: writes the sentinel of the backup `name` a standby
    /// takes, once (again at the next look when it failed).
    fn write_sentinel_for_standby(&mut self, ctx: &InstanceContext, name: &str) {
        if let Some((written, outcome)) = take_finished(&mut self.sentinel_writing, "sentinel") {
            match outcome.and_then(|done| done) {
                Ok(()) => self.sentinel_written = Some(written),
                Err(error) => {
                    tracing::warn!(backup = %written, %error, "writing a standby backup's sentinel failed")
                }
            }
        }
        if self.sentinel_written.as_deref() == Some(name) || self.sentinel_writing.is_some() {
            return;
        }
        let (ctx, owned) = (ctx.clone(), name.to_owned());
        let task = tokio::spawn(async move { write_sentinel(&ctx, &owned).await });
        self.sentinel_writing = Some((name.to_owned(), task));
    }
}

/// Where this instance takes the backup `request` assigns it from:
/// `Ok(None)` not yet (a primary whose stanza is not created, an instance
/// not serving), `Err` why it cannot (a standby without the primary's
/// server or without TLS).
fn source(
    ctx: &InstanceContext,
    desired: &DesiredState,
    state: &SharedState,
    serving: Serving,
    request: &BackupAssignment,
) -> Result<Option<Source>, String> {
    let me = &ctx.settings.pod_name;
    if desired.target_primary.as_deref() == Some(me.as_str()) {
        let stanza_ready = state
            .lock()
            .archiving
            .as_ref()
            .is_some_and(|a| a.stanza_created);
        return Ok((serving == Serving::Primary && stanza_ready).then_some(Source::Primary));
    }
    if serving != Serving::Standby {
        return Ok(None);
    }
    let primary = primary_host(ctx, request.primary_server.as_ref())?;
    let installed = ctx.tls().ok_or_else(|| {
        format!(
            "{me} is a standby without TLS (no certificate mounted, or PostgreSQL built without it); a standby backs up only through its primary's TLS server"
        )
    })?;
    Ok(Some(Source::Standby(primary, installed.backup_client())))
}

/// The primary a standby's backup reaches, as the assignment names its
/// pgBackRest server (the primary's report, copied by the operator).
fn primary_host(
    ctx: &InstanceContext,
    server: Option<&BackupServer>,
) -> Result<PrimaryHost, String> {
    let me = &ctx.settings.pod_name;
    let server = server.ok_or_else(|| {
        format!("{me} is a standby and the assignment names no pgBackRest server of the primary to back up through")
    })?;
    let address: SocketAddr = server.address.parse().map_err(|e| {
        format!(
            "the primary's pgBackRest server address {:?} is not address:port: {e}",
            server.address
        )
    })?;
    Ok(PrimaryHost {
        address: address.ip(),
        server_port: address.port(),
        pgdata: server.data_directory.clone(),
        socket_dir: server.socket_directory.clone(),
        port: server.port,
        superuser: ctx.settings.credentials.superuser.username.clone(),
    })
}

/// Takes the backup `request` asks for, unless the repository holds it
/// already; its record.
async fn take(
    ctx: &InstanceContext,
    request: &BackupAssignment,
    repository: &Repository,
    source: &Source,
) -> PostgresBackupStatus {
    let record = |info: BackupInfo| completed(ctx, repository, info);
    match find(ctx, &request.backup).await {
        Ok(Some(info)) => return record(info),
        Ok(None) => {}
        Err(error) => return failed(ctx, error),
    }
    let mut args = pgbackrest::backup_args(request.backup_type.pgbackrest(), &request.backup);
    let sentinel = match source {
        Source::Primary => write_sentinel(ctx, &request.backup).await,
        Source::Standby(primary, client) => {
            args.extend(pgbackrest::standby_backup_args(primary, client));
            sentinel_replicated(ctx, &request.backup).await
        }
    };
    if let Err(error) = sentinel {
        return failed(ctx, error);
    }
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

/// On a standby: waits until the sentinel of backup `name`, which the
/// primary writes when it sees the backup assigned here, has replicated.
async fn sentinel_replicated(ctx: &InstanceContext, name: &str) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + SENTINEL_REPLICATION_TIMEOUT;
    let mut last = String::from("no look yet");
    while tokio::time::Instant::now() < deadline {
        match sql::connect(&ctx.local_target(), "postgres").await {
            Ok(client) => match sentinel::check(&client, name).await {
                Ok(()) => return Ok(()),
                Err(why) => last = why,
            },
            Err(error) => last = error.to_string(),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(format!(
        "the primary's sentinel for {name} did not replicate to this standby within {SENTINEL_REPLICATION_TIMEOUT:?} ({last})"
    ))
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
