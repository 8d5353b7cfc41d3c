//! Continuous WAL archiving through pgBackRest: the stanza is created in
//! the repository once the primary runs, and the archiver's health is read
//! for `/status`.
//!
//! PostgreSQL itself archives: `archive_command` (rendered with the rest
//! of `postgresql.conf`, see `InstanceContext::render`) hands each finished
//! segment to `pgbackrest archive-push`, which pushes asynchronously.
//! Segments stay in `pg_wal` until pushed, so a failing repository never
//! loses WAL; it is reported instead (`pg_stat_archiver`, pgBackRest's
//! status files), so the disk does not fill silently.
//!
//! After a major upgrade the stanza records the old database, and
//! `stanza-create` refuses it: the stanza is upgraded then, for the
//! upgrade of the recorded database only (`pgbackrest::StanzaMismatch`).
//!
//! `stanza-create` talks to the object store (its timeouts are a minute),
//! so it runs as a task beside the convergence loop, never blocking it;
//! a failure is retried with a growing delay and reported meanwhile.

use std::path::Path;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tusk_postgres::pgbackrest::{self, Repository};

use crate::context::InstanceContext;
use crate::desired::DesiredState;
use crate::state::{ArchivingState, SharedState};
use crate::supervisor::Backoff;
use crate::task::take_finished;

/// The longest a `stanza-create` (or `stanza-upgrade`, or the `info` that
/// decides it) may take before it is killed and retried.
const STANZA_CREATE_TIMEOUT: Duration = Duration::from_secs(180);

/// Creating the stanza, on the primary, once per repository.
pub struct StanzaCreation {
    /// The repository the stanza was created in.
    created_in: Option<Repository>,
    running: Option<(Repository, JoinHandle<Result<(), String>>)>,
    retry_at: Option<Instant>,
    backoff: Backoff,
}

impl Default for StanzaCreation {
    fn default() -> Self {
        StanzaCreation {
            created_in: None,
            running: None,
            retry_at: None,
            backoff: Backoff::new(Duration::from_secs(2), Duration::from_secs(60)),
        }
    }
}

impl StanzaCreation {
    /// One look, from the convergence loop: collects a finished attempt,
    /// publishes the stanza's state, and starts an attempt when this
    /// instance runs as primary and the stanza is not there yet. Never
    /// waits.
    pub fn converge(
        &mut self,
        ctx: &InstanceContext,
        desired: &DesiredState,
        state: &SharedState,
        running_primary: bool,
    ) {
        let Some(repository) = &desired.archiving else {
            self.created_in = None;
            state.lock().archiving = None;
            return;
        };
        let mut error = state
            .lock()
            .archiving
            .as_ref()
            .and_then(|a| a.stanza_error.clone());
        if let Some((tried, outcome)) = take_finished(&mut self.running, "stanza-create") {
            match outcome.and_then(|created| created) {
                Ok(()) => {
                    tracing::info!(stanza = %ctx.settings.cluster_name, "pgBackRest stanza ready");
                    self.created_in = Some(tried);
                    self.backoff.reset();
                    error = None;
                }
                Err(message) => {
                    let delay = self.backoff.next_delay();
                    tracing::warn!(%message, retry_in_seconds = delay.as_secs(), "pgBackRest stanza-create failed");
                    self.retry_at = Some(Instant::now() + delay);
                    error = Some(message);
                }
            }
        }
        let created = self.created_in.as_ref() == Some(repository);
        state.lock().archiving = Some(ArchivingState {
            stanza: ctx.settings.cluster_name.clone(),
            stanza_created: created,
            stanza_error: if created { None } else { error },
        });
        let due = self.retry_at.is_none_or(|at| Instant::now() >= at);
        if running_primary && !created && self.running.is_none() && due {
            let ctx = ctx.clone();
            self.running = Some((
                repository.clone(),
                tokio::spawn(async move { create_stanza(&ctx).await }),
            ));
        }
    }
}

/// `pgbackrest stanza-create`: idempotent, it succeeds when the stanza
/// already exists for this database. A stanza recording the database this
/// data was upgraded from is upgraded instead ([`upgrade_stanza`]).
async fn create_stanza(ctx: &InstanceContext) -> Result<(), String> {
    match run(ctx, &["stanza-create"], STANZA_CREATE_TIMEOUT).await {
        Ok(output) => {
            tracing::debug!(%output, "stanza-create");
            Ok(())
        }
        Err(refusal) if pgbackrest::is_database_mismatch(&refusal) => {
            upgrade_stanza(ctx, refusal).await
        }
        Err(error) => Err(error),
    }
}

/// After `pg_upgrade` the stanza still records the old major and system
/// identifier, and `stanza-create` refuses it (`refusal`): when the stanza
/// records an older major than this data's, `stanza-upgrade` records the
/// upgraded database in its history and archiving resumes. Any other
/// database's stanza is left as it is, and the refusal kept, with why.
async fn upgrade_stanza(ctx: &InstanceContext, refusal: String) -> Result<(), String> {
    let kept = |why: String| format!("{refusal} ({why})");
    let data_major = crate::datadir::data_major_version(&ctx.settings.pgdata)
        .map_err(|e| kept(e.to_string()))?;
    let info = run(ctx, &["info", "--output=json"], STANZA_CREATE_TIMEOUT)
        .await
        .map_err(kept)?;
    let recorded =
        pgbackrest::recorded_database(&info, &ctx.settings.cluster_name).map_err(kept)?;
    let mismatch = pgbackrest::StanzaMismatch::of(recorded.as_ref(), data_major);
    let pgbackrest::StanzaMismatch::Upgraded { from, to } = mismatch else {
        return Err(kept(mismatch.kept_because()));
    };
    let output = run(ctx, &["stanza-upgrade"], STANZA_CREATE_TIMEOUT).await?;
    tracing::debug!(%output, "stanza-upgrade");
    tracing::info!(
        stanza = %ctx.settings.cluster_name,
        from_major = from,
        to_major = to,
        "pgBackRest stanza upgraded to the upgraded database"
    );
    Ok(())
}

/// Runs pgBackRest `command` (with its options) for this cluster's stanza
/// as the PostgreSQL user, with the repository's keys in its environment
/// only, for at most `timeout`; its output, or its error summarised.
pub async fn run(
    ctx: &InstanceContext,
    command: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let config = ctx.pgbackrest_config();
    let invocation = Invocation {
        config: &config,
        stanza: &ctx.settings.cluster_name,
        env: ctx.pgbackrest_env(),
    };
    run_with(ctx, &invocation, command, timeout).await
}

/// Which configuration, stanza and keys a pgBackRest command runs with.
pub struct Invocation<'a> {
    pub config: &'a Path,
    pub stanza: &'a str,
    pub env: Vec<(&'static str, &'a str)>,
}

/// [`run`] with another configuration, stanza and keys (a restore reads
/// another cluster's repository).
pub async fn run_with(
    ctx: &InstanceContext,
    invocation: &Invocation<'_>,
    command: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let config = invocation.config.display().to_string();
    let mut process = ctx.user.command(Path::new(pgbackrest::PROGRAM));
    process
        .args(pgbackrest::base_args(&config, invocation.stanza))
        .args(command)
        .envs(invocation.env.iter().copied());
    let command = command.join(" ");
    let output = tokio::time::timeout(timeout, process.output())
        .await
        .map_err(|_| format!("pgbackrest {command} took over {timeout:?}"))?
        .map_err(|e| format!("cannot run pgbackrest: {e}"))?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    if output.status.success() {
        Ok(text)
    } else {
        Err(pgbackrest::error_summary(&text).unwrap_or_else(|| {
            let tail: Vec<&str> = text.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!(
                "pgbackrest {command} failed ({}): {}",
                output.status,
                tail.join(" | ")
            )
        }))
    }
}

/// pgBackRest's message for the newest failed asynchronous push of
/// `stanza`, from its spool; `None` when it left none.
pub fn push_error(ctx: &InstanceContext) -> Option<String> {
    let spool = ctx.settings.pgbackrest_dir().join("spool");
    let dir =
        pgbackrest::archive_status_dir(&spool.display().to_string(), &ctx.settings.cluster_name);
    let newest = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".error"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()?;
    pgbackrest::status_file_message(&std::fs::read_to_string(newest.1).ok()?)
}
