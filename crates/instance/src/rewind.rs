//! Turning a former primary into a standby of the new primary: `pg_rewind`
//! against the new primary (it undoes the WAL the new primary never saw),
//! or, when that fails, a fresh clone.
//!
//! A fresh clone replaces the local data, so it is made only from a
//! primary of the same database system (the same system identifier): an
//! instance pointed at another cluster's primary keeps its data and
//! reports the mismatch instead.

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
    #[error(
        "refusing to replace this instance's data: it belongs to database system {local}, the primary to {primary}"
    )]
    DifferentSystem { local: String, primary: String },
    #[error("cannot read the primary's system identifier: {0}")]
    PrimaryIdentity(#[from] tokio_postgres::Error),
    #[error("pg_controldata printed no system identifier")]
    NoLocalIdentity,
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
        .await?
        .try_get(0)?;
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
            tracing::warn!(%error, "pg_rewind failed; trying a fresh clone of the primary");
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
    ensure_same_system(ctx, primary).await?;
    let aside = datadir::move_aside(&ctx.settings.pgdata)?;
    tracing::info!(kept = %aside.display(), "former data directory moved aside");
    bootstrap::clone_from(ctx, desired, primary).await?;
    Ok(RejoinMethod::Recloned)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
