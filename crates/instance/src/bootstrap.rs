//! Creating the data directory of a new instance: `initdb` on the target
//! primary, a `pg_basebackup` clone of the primary on a replica.
//!
//! Restartable: the work happens in a staging directory next to PGDATA that
//! is wiped before each attempt and renamed into place only when complete,
//! so a crash half-way leaves nothing that blocks the next try.

use std::net::IpAddr;
use std::time::Duration;

use crate::context::InstanceContext;
use crate::datadir::{self, DataDirError};
use crate::desired::DesiredState;
use crate::passwords;
use crate::postgres::config::ReplicationRole;
use crate::sql::{self, SqlError, quote_identifier};
use crate::supervisor::{Postmaster, SupervisorError};
use crate::tools::{self, ToolError};

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error("cannot start PostgreSQL to create roles: {0}")]
    Supervisor(#[from] SupervisorError),
    #[error("cannot create roles and database: {0}")]
    Sql(#[from] SqlError),
}

/// Creates a new cluster with `initdb` (data checksums on, SCRAM
/// passwords), then the replication role, the application owner and its
/// database.
pub async fn initdb(ctx: &InstanceContext, desired: &DesiredState) -> Result<(), BootstrapError> {
    let staging = fresh_staging(ctx)?;
    let pwfile = ctx.settings.run_dir.join("initdb.pw");
    ctx.user
        .private_file(
            &pwfile,
            ctx.settings.credentials.superuser.password.expose(),
        )
        .map_err(DataDirError::from)?;
    let result = tools::run(
        ctx,
        "initdb",
        [
            "--pgdata".as_ref(),
            staging.as_os_str(),
            "--data-checksums".as_ref(),
            "--auth=scram-sha-256".as_ref(),
            "--encoding=UTF8".as_ref(),
            "--locale=C".as_ref(),
            "--username".as_ref(),
            ctx.settings.credentials.superuser.username.as_ref(),
            "--pwfile".as_ref(),
            pwfile.as_os_str(),
        ],
    )
    .await;
    let _ = std::fs::remove_file(&pwfile);
    result?;

    ctx.write_config(&staging, desired, ReplicationRole::Primary)?;
    create_roles(ctx, &staging, desired).await?;
    datadir::promote_staging(&staging, &ctx.settings.pgdata)?;
    tracing::info!(pgdata = %ctx.settings.pgdata.display(), "new cluster initialised");
    Ok(())
}

/// Starts the staging cluster on its unix socket only, creates the roles
/// and the database, and stops it cleanly.
async fn create_roles(
    ctx: &InstanceContext,
    staging: &std::path::Path,
    desired: &DesiredState,
) -> Result<(), BootstrapError> {
    let postmaster = Postmaster::start(
        &ctx.user,
        &ctx.settings.bin_dir,
        staging,
        // No network, no waiting for standbys that do not exist yet, and no
        // archiving before the stanza exists (WAL from before the first
        // base backup restores nothing).
        &[
            ("listen_addresses", ""),
            ("synchronous_standby_names", ""),
            ("archive_mode", "off"),
        ],
        &[],
    )?;
    let result = async {
        let client = sql::wait_ready(&ctx.local_target(), Duration::from_secs(60)).await?;
        for statement in role_statements(ctx, desired) {
            client
                .batch_execute(&statement)
                .await
                .map_err(SqlError::from)?;
        }
        passwords::converge(&client, &ctx.settings.credentials).await?;
        Ok::<_, BootstrapError>(())
    }
    .await;
    postmaster.stop(ctx.settings.stop_timeout).await;
    result
}

/// The statements creating the roles and database; their passwords are set
/// afterwards by [`passwords::converge`].
fn role_statements(ctx: &InstanceContext, desired: &DesiredState) -> Vec<String> {
    let credentials = &ctx.settings.credentials;
    let replication = quote_identifier(&credentials.replication.username);
    let mut statements = vec![format!("CREATE ROLE {replication} WITH LOGIN REPLICATION")];
    // pg_rewind reads the source's files through these functions; granting
    // them keeps the superuser's password out of the standbys.
    for function in [
        "pg_ls_dir(text, boolean, boolean)",
        "pg_stat_file(text, boolean)",
        "pg_read_binary_file(text)",
        "pg_read_binary_file(text, bigint, bigint, boolean)",
    ] {
        statements.push(format!(
            "GRANT EXECUTE ON FUNCTION pg_catalog.{function} TO {replication}"
        ));
    }
    let owner = quote_identifier(&desired.owner);
    if desired.owner != credentials.superuser.username {
        statements.push(format!("CREATE ROLE {owner} WITH LOGIN"));
    }
    if desired.database != "postgres" {
        statements.push(format!(
            "CREATE DATABASE {} OWNER {owner}",
            quote_identifier(&desired.database)
        ));
    }
    statements
}

/// Clones the primary at `primary` with `pg_basebackup` (WAL streamed
/// alongside) and configures the copy as its hot standby.
pub async fn clone_from(
    ctx: &InstanceContext,
    desired: &DesiredState,
    primary: IpAddr,
) -> Result<(), BootstrapError> {
    let staging = fresh_staging(ctx)?;
    let host = primary.to_string();
    let port = ctx.settings.postgres_port.to_string();
    tools::run(
        ctx,
        "pg_basebackup",
        [
            "--pgdata".as_ref(),
            staging.as_os_str(),
            "--host".as_ref(),
            host.as_ref(),
            "--port".as_ref(),
            port.as_ref(),
            "--username".as_ref(),
            ctx.settings.credentials.replication.username.as_ref(),
            "--wal-method=stream".as_ref(),
            "--checkpoint=fast".as_ref(),
            "--no-password".as_ref(),
        ],
    )
    .await?;
    ctx.write_config(
        &staging,
        desired,
        ReplicationRole::Standby(ctx.upstream(primary)),
    )?;
    datadir::promote_staging(&staging, &ctx.settings.pgdata)?;
    tracing::info!(%primary, "cloned the primary");
    Ok(())
}

/// An empty staging directory owned by the PostgreSQL user; whatever a
/// previous, interrupted attempt left there is removed first.
fn fresh_staging(ctx: &InstanceContext) -> Result<std::path::PathBuf, DataDirError> {
    ctx.prepare_run_dir()?;
    let staging = ctx.settings.staging_dir();
    datadir::remove_dir(&staging)?;
    ctx.user.private_dir(&staging)?;
    Ok(staging)
}
