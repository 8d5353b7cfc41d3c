//! Running PostgreSQL's command-line programs (initdb, pg_basebackup,
//! pg_rewind) as the PostgreSQL user, with their output logged and their
//! failure reported with the last lines they printed.

use std::ffi::OsStr;
use std::time::Instant;

use crate::context::InstanceContext;

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} failed ({status}): {output}")]
    Failed {
        program: String,
        status: std::process::ExitStatus,
        output: String,
    },
}

/// Runs `command`, PostgreSQL's program `program`, to completion: what it
/// printed (standard output, then standard error), each line logged at
/// debug level, and how it exited.
pub async fn output(
    program: &str,
    command: &mut tokio::process::Command,
) -> Result<(String, std::process::ExitStatus), ToolError> {
    let output = command.output().await.map_err(|source| ToolError::Spawn {
        program: program.to_owned(),
        source,
    })?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        tracing::debug!(target: "postgres", program, "{line}");
    }
    Ok((text, output.status))
}

/// Runs `program` from the PostgreSQL bin directory to completion. The
/// replication password file is offered through `PGPASSFILE`, so no
/// password is ever on a command line, and the replication user's
/// certificate through libpq's TLS variables.
pub async fn run<I, S>(ctx: &InstanceContext, program: &str, args: I) -> Result<String, ToolError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_with(ctx, program, None, args).await
}

/// [`run`], with one more environment variable (`PGHOSTADDR`).
pub async fn run_with<I, S>(
    ctx: &InstanceContext,
    program: &str,
    extra: Option<(&str, String)>,
    args: I,
) -> Result<String, ToolError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let path = ctx.settings.binary(program);
    let started = Instant::now();
    let mut command = ctx.user.command(&path);
    command
        .args(args)
        .env("PGPASSFILE", ctx.settings.passfile())
        .env("PGCONNECT_TIMEOUT", "10")
        .envs(ctx.libpq_tls_env())
        .envs(extra);
    let (text, status) = output(program, &mut command).await?;
    tracing::info!(
        program,
        seconds = started.elapsed().as_secs_f64(),
        success = status.success(),
        "PostgreSQL program finished"
    );
    if status.success() {
        Ok(text)
    } else {
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        Err(ToolError::Failed {
            program: program.to_owned(),
            status,
            output: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
        })
    }
}
