//! Turning a former primary into a standby of the new primary: `pg_rewind`
//! against the new primary (it undoes the WAL the new primary never saw),
//! or, when that fails, a fresh clone.

use std::net::IpAddr;

use crate::bootstrap::{self, BootstrapError};
use crate::context::InstanceContext;
use crate::datadir::{self, DataDirError};
use crate::desired::DesiredState;
use crate::postgres::config::ReplicationRole;
use crate::tools::{self, ToolError};

#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error("pg_rewind failed and so did a fresh clone: {0}")]
    Reclone(#[from] BootstrapError),
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
    let source = format!(
        "host={primary} port={} user={} dbname=postgres connect_timeout=10",
        ctx.settings.postgres_port, ctx.settings.credentials.replication.username
    );
    tools::run(
        ctx,
        "pg_rewind",
        [
            "--target-pgdata".as_ref(),
            pgdata.as_os_str(),
            "--source-server".as_ref(),
            source.as_ref(),
        ],
    )
    .await?;
    // pg_rewind copies the source's configuration files: render ours again.
    ctx.write_config(
        pgdata,
        desired,
        ReplicationRole::Standby(ctx.upstream(primary)),
    )?;
    Ok(())
}

/// Rewinds, falling back to a fresh clone (the old data directory is kept
/// aside once) when the rewind fails.
pub async fn rejoin(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<RejoinMethod, RewindError> {
    match rewind(ctx, desired, primary).await {
        Ok(()) => Ok(RejoinMethod::Rewound),
        Err(error) => {
            tracing::warn!(%error, "pg_rewind failed; cloning the primary afresh");
            reclone(ctx, desired, primary).await
        }
    }
}

/// Replaces the stopped data directory with a fresh clone of the primary
/// (the old one is kept aside once).
pub async fn reclone(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<RejoinMethod, RewindError> {
    let aside = datadir::move_aside(&ctx.settings.pgdata)?;
    tracing::info!(kept = %aside.display(), "former data directory moved aside");
    bootstrap::clone_from(ctx, desired, primary).await?;
    Ok(RejoinMethod::Recloned)
}
