//! Turning a former primary into a standby of the new primary: `pg_rewind`
//! against the new primary (it undoes the WAL the new primary never saw),
//! or, only when the divergence is one a rewind cannot undo, a fresh clone.
//!
//! Data is never destroyed on a guess. A rewind that fails for any other
//! reason (the primary unreachable for a moment, say) is retried with
//! back-off and the data stays as it is ([`RewindError::Retrying`]). A fresh
//! clone keeps the replaced data directory aside
//! ([`datadir::move_aside`]): at most one such copy, kept until a person
//! deletes it; while it is there, a further clone waits.
//!
//! A fresh clone is made only from a primary of the same database system
//! (the same system identifier): an instance pointed at another cluster's
//! primary keeps its data and reports the mismatch instead.

use std::net::IpAddr;
use std::time::Duration;

use crate::bootstrap::{self, BootstrapError};
use crate::context::InstanceContext;
use crate::datadir::{self, DataDirError};
use crate::desired::DesiredState;
use crate::diverged;
use crate::postgres::config::{self, RemoteLogin, ReplicationRole};
use crate::tools::{self, ToolError};

/// The waits between rewind attempts within one rejoin; after the last,
/// the convergence loop retries later with its own growing delay.
const RETRY_DELAYS: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// What pg_rewind printed when it stopped, as far as a fresh clone is
/// concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewindFailure {
    /// The divergence cannot be undone by a rewind, now or later: the
    /// target's WAL back to the fork is gone, the timelines share no
    /// ancestor, or the data has neither checksums nor `wal_log_hints`.
    Unrecoverable,
    /// Anything else (a refused or dropped connection, a primary still
    /// starting, an unknown message): worth another attempt, never a
    /// reason to replace the data.
    Retry,
}

/// Messages of pg_rewind (PostgreSQL 13 to 17) after which no rewind can
/// succeed.
const UNRECOVERABLE: [&str; 4] = [
    "could not find previous WAL record",
    "could not read WAL record",
    "could not find common ancestor",
    "needs to use either data checksums or",
];

/// Classifies a failed pg_rewind run by its output.
pub fn classify(error: &ToolError) -> RewindFailure {
    let ToolError::Failed { output, .. } = error else {
        return RewindFailure::Retry;
    };
    let missing_wal = output.contains("could not open file") && output.contains("pg_wal");
    if missing_wal || UNRECOVERABLE.iter().any(|m| output.contains(m)) {
        RewindFailure::Unrecoverable
    } else {
        RewindFailure::Retry
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error("pg_rewind failed and so did a fresh clone: {0}")]
    Reclone(#[from] BootstrapError),
    #[error(
        "refusing to replace this instance's data: it belongs to database system {local}, the primary to {primary}"
    )]
    DifferentSystem { local: String, primary: String },
    #[error("cannot read the primary's system identifier: {0}")]
    PrimaryIdentity(#[from] crate::context::RemoteError),
    #[error("pg_controldata printed no system identifier or WAL segment size")]
    NoLocalIdentity,
    #[error("cannot keep a copy of the WAL the rewind would discard, so it does not run: {0}")]
    KeepWal(String),
    #[error(
        "pg_rewind failed {attempts} times; the data is kept as it is and the rewind is retried: {source}"
    )]
    Retrying { attempts: usize, source: ToolError },
    #[error(
        "the standby still cannot stream after a rewind, and its primary still has the WAL it needs: no fresh clone replaces its data; see docs/runbook.md, \"A standby does not stream\""
    )]
    StillStalled,
    #[error("cannot tell whether the primary still has the WAL this standby needs: {0}")]
    PrimaryWal(String),
}

/// The database system identifier in `pg_controldata` output.
pub fn system_identifier(control_data: &str) -> Option<&str> {
    control_data
        .lines()
        .find_map(|line| line.strip_prefix("Database system identifier:"))
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

/// Fails unless the stopped local data directory and the primary at
/// `primary` are the same database system.
async fn ensure_same_system(ctx: &InstanceContext, primary: IpAddr) -> Result<(), RewindError> {
    let control = tools::run(ctx, "pg_controldata", [ctx.settings.pgdata.as_os_str()]).await?;
    let local = system_identifier(&control)
        .ok_or(RewindError::NoLocalIdentity)?
        .to_owned();
    let client = ctx.connect_remote(primary).await?;
    let remote: String = client
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(crate::context::RemoteError::from)?;
    if local == remote {
        Ok(())
    } else {
        Err(RewindError::DifferentSystem {
            local,
            primary: remote,
        })
    }
}

/// How the instance rejoined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejoinMethod {
    Rewound,
    Recloned,
}

/// Rewinds the stopped data directory to the history of the primary at
/// `primary` and configures it as that primary's standby.
pub async fn rewind(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<(), RewindError> {
    ctx.prepare_run_dir()?;
    let pgdata = &ctx.settings.pgdata;
    let source = source_server(ctx, primary);
    let args = [
        "--target-pgdata".as_ref(),
        pgdata.as_os_str(),
        "--source-server".as_ref(),
        source.as_ref(),
    ];
    keep_discarded_wal(ctx, &args).await?;
    tools::run(ctx, "pg_rewind", args).await?;
    // pg_rewind copies the source's configuration files: render ours again.
    ctx.write_config(
        pgdata,
        desired,
        ReplicationRole::Standby(ctx.upstream(primary)),
    )?;
    Ok(())
}

/// pg_rewind's connection to the primary at `primary`: an ordinary one,
/// as the replication user with its SCRAM password, over TLS with the
/// primary verified by name when the pod has certificates.
fn source_server(ctx: &InstanceContext, primary: IpAddr) -> String {
    let mut settings = match ctx.client_tls() {
        Some(tls) => tls.libpq_settings(primary, RemoteLogin::Scram),
        None => vec![("host", primary.to_string())],
    };
    settings.extend([
        ("port", ctx.settings.postgres_port.to_string()),
        (
            "user",
            ctx.settings.credentials.replication.username.clone(),
        ),
        ("dbname", "postgres".to_owned()),
        ("connect_timeout", "10".to_owned()),
    ]);
    config::conninfo(&settings)
}

/// Copies the WAL the rewind with `args` is about to discard (the
/// divergence its dry run prints) beside the data ([`diverged::keep`]).
/// A failed dry run fails as the rewind would; a copy that cannot be made
/// stops the rewind, so nothing is discarded without its copy.
async fn keep_discarded_wal(
    ctx: &InstanceContext,
    args: &[&std::ffi::OsStr],
) -> Result<(), RewindError> {
    finish_crash_recovery(ctx).await?;
    let dry_run = args
        .iter()
        .copied()
        .chain([std::ffi::OsStr::new("--dry-run")]);
    let printed = tools::run(ctx, "pg_rewind", dry_run).await?;
    let Some(divergence) = diverged::divergence(&printed) else {
        return Ok(());
    };
    let pgdata = &ctx.settings.pgdata;
    let control = tools::run(ctx, "pg_controldata", [pgdata.as_os_str()]).await?;
    let size = diverged::segment_size(&control).ok_or(RewindError::NoLocalIdentity)?;
    let (folder, segments) = diverged::keep(pgdata, divergence, size)
        .map_err(|source| RewindError::KeepWal(source.to_string()))?;
    tracing::warn!(folder = %folder.display(), segments, "the WAL this rewind discards is kept; it may hold writes the new primary never received");
    Ok(())
}

/// Brings data that was not shut down cleanly (a crashed primary) to a
/// clean shutdown, as pg_rewind itself does before it rewinds: PostgreSQL
/// in single-user mode replays its WAL and stops. Its dry run does not,
/// and refuses such data.
async fn finish_crash_recovery(ctx: &InstanceContext) -> Result<(), RewindError> {
    let pgdata = ctx.settings.pgdata.as_os_str();
    let control = tools::run(ctx, "pg_controldata", [pgdata]).await?;
    if shut_down_cleanly(&control) {
        return Ok(());
    }
    tracing::info!("the data was not shut down cleanly: replaying its WAL before the rewind");
    let single = [
        "--single".as_ref(),
        "-F".as_ref(),
        "-D".as_ref(),
        pgdata,
        "template1".as_ref(),
    ];
    tools::run(ctx, "postgres", single).await?;
    Ok(())
}

/// Whether `pg_controldata` says the data was shut down cleanly (as a
/// primary or as a standby), which pg_rewind requires.
pub fn shut_down_cleanly(control_data: &str) -> bool {
    control_data
        .lines()
        .find_map(|line| line.strip_prefix("Database cluster state:"))
        .is_some_and(|state| matches!(state.trim(), "shut down" | "shut down in recovery"))
}

/// Rewinds, retrying with back-off, and falls back to a fresh clone (the
/// old data directory kept aside) only when pg_rewind reports a
/// divergence no rewind can undo.
pub async fn rejoin(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<RejoinMethod, RewindError> {
    let mut delays = RETRY_DELAYS.iter();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let error = match attempt(ctx, desired, primary).await {
            Ok(()) => return Ok(RejoinMethod::Rewound),
            Err(RewindError::Tool(error)) => error,
            // The primary did not answer: as transient as a failed rewind.
            Err(RewindError::PrimaryIdentity(error)) => {
                if let Some(delay) = delays.next() {
                    tracing::warn!(%error, attempts, retry_in_seconds = delay.as_secs(), "the primary does not answer; retrying the rewind, the data is kept");
                    tokio::time::sleep(*delay).await;
                    continue;
                }
                return Err(RewindError::PrimaryIdentity(error));
            }
            Err(other) => return Err(other),
        };
        if classify(&error) == RewindFailure::Unrecoverable {
            tracing::warn!(%error, "pg_rewind cannot undo this divergence; cloning the primary afresh, keeping the old data aside");
            return reclone(ctx, desired, primary).await;
        }
        let Some(delay) = delays.next() else {
            return Err(RewindError::Retrying {
                attempts,
                source: error,
            });
        };
        tracing::warn!(%error, attempts, retry_in_seconds = delay.as_secs(), "pg_rewind failed; retrying, the data is kept");
        tokio::time::sleep(*delay).await;
    }
}

/// One rewind, only onto a primary of the same database system.
async fn attempt(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<(), RewindError> {
    ensure_same_system(ctx, primary).await?;
    rewind(ctx, desired, primary).await
}

/// Whether the primary at `primary` no longer has the WAL segment holding
/// `lsn` (on any timeline): a standby that needs it cannot stream again,
/// and without an archive to restore it from, only a fresh clone helps.
pub async fn primary_lacks_wal(
    ctx: &InstanceContext,
    primary: IpAddr,
    lsn: &str,
) -> Result<bool, RewindError> {
    let failed = |error: tokio_postgres::Error| {
        RewindError::PrimaryWal(
            error
                .as_db_error()
                .map_or_else(|| error.to_string(), |db| db.message().to_owned()),
        )
    };
    let client = ctx
        .connect_remote(primary)
        .await
        .map_err(|error| RewindError::PrimaryWal(error.to_string()))?;
    // The segment's name without its timeline (the first 8 of 24 digits).
    let row = client
        .query_one(
            "SELECT NOT EXISTS (SELECT 1 FROM pg_ls_dir('pg_wal', true, false) AS f \
               WHERE f ~ '^[0-9A-F]{24}$' \
                 AND substr(f, 9) = substr(pg_walfile_name($1::text::pg_lsn), 9))",
            &[&lsn],
        )
        .await
        .map_err(failed)?;
    row.try_get(0).map_err(failed)
}

/// Replaces the stopped data directory with a fresh clone of the primary;
/// the old one is kept aside (refused while an earlier copy is kept).
pub async fn reclone(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<RejoinMethod, RewindError> {
    ensure_same_system(ctx, primary).await?;
    let aside = datadir::move_aside(&ctx.settings.pgdata)?;
    tracing::warn!(kept = %aside.display(), "former data directory moved aside and kept until deleted by hand");
    bootstrap::clone_from(ctx, desired, primary).await?;
    Ok(RejoinMethod::Recloned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_clean_shutdown_is_clean() {
        let state = |s: &str| {
            format!(
                "pg_control version number:            1300\nDatabase cluster state:               {s}\n"
            )
        };
        assert!(shut_down_cleanly(&state("shut down")));
        assert!(shut_down_cleanly(&state("shut down in recovery")));
        assert!(
            !shut_down_cleanly(&state("in production")),
            "a crashed primary"
        );
        assert!(
            !shut_down_cleanly(&state("in archive recovery")),
            "a crashed standby"
        );
        assert!(!shut_down_cleanly(""));
    }

    #[test]
    fn the_system_identifier_is_read_from_pg_controldata() {
        let output = "pg_control version number:            1300\n\
                      Catalog version number:               202209061\n\
                      Database system identifier:           7714717255178657428\n\
                      Database cluster state:               shut down\n";
        assert_eq!(system_identifier(output), Some("7714717255178657428"));
        assert_eq!(system_identifier("Database system identifier:   \n"), None);
        assert_eq!(system_identifier(""), None);
    }

    fn failed(output: &str) -> ToolError {
        use std::os::unix::process::ExitStatusExt;
        ToolError::Failed {
            program: "pg_rewind".into(),
            status: std::process::ExitStatus::from_raw(256),
            output: output.into(),
        }
    }

    #[test]
    fn only_a_divergence_no_rewind_can_undo_leads_to_a_fresh_clone() {
        use RewindFailure::{Retry, Unrecoverable};
        let cases = [
            (
                "pg_rewind: error: connection to server at \"10.0.0.2\", port 5432 failed: Connection refused",
                Retry,
            ),
            (
                "pg_rewind: error: could not connect to server: timeout expired",
                Retry,
            ),
            (
                "pg_rewind: error: server closed the connection unexpectedly",
                Retry,
            ),
            ("FATAL: the database system is starting up", Retry),
            ("pg_rewind: error: something new", Retry),
            (
                "pg_rewind: error: could not open file \"/data/pgdata/pg_wal/000000010000000000000003\": No such file or directory | pg_rewind: error: could not find previous WAL record at 0/3000060",
                Unrecoverable,
            ),
            (
                "pg_rewind: fatal: could not find common ancestor of the source and target cluster's timelines",
                Unrecoverable,
            ),
            (
                "pg_rewind: error: target server needs to use either data checksums or \"wal_log_hints = on\"",
                Unrecoverable,
            ),
        ];
        for (output, expected) in cases {
            assert_eq!(classify(&failed(output)), expected, "{output}");
        }
        let spawn = ToolError::Spawn {
            program: "pg_rewind".into(),
            source: std::io::Error::other("no such file"),
        };
        assert_eq!(classify(&spawn), Retry);
    }
}
