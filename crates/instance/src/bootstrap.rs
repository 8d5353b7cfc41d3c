//! Creating the data directory of a new instance: `initdb` on the target
//! primary, a `pg_basebackup` clone of the primary on a replica.
//!
//! Restartable: the work happens in a staging directory next to PGDATA that
//! is wiped before each attempt and renamed into place only when complete,
//! so a crash half-way leaves nothing that blocks the next try.

use std::net::IpAddr;
use std::time::Duration;

use tusk_postgres::pgbackrest;

use tusk_postgres::upgrade::INITDB_LOCALE_ARGS;

use crate::archiving::{self, Invocation};
use crate::context::InstanceContext;
use crate::datadir::{self, DataDirError};
use crate::desired::{DesiredState, RestoreSource};
use crate::passwords;
use crate::postgres::config::ReplicationRole;
use crate::sql::{self, SqlError, quote_identifier};
use crate::supervisor::{Postmaster, SupervisorError, process_alive};
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
    #[error("restore failed: {0}")]
    Restore(String),
}

/// The longest `pgbackrest restore`, and then recovery, may take.
pub(crate) const RESTORE_TIMEOUT: Duration = Duration::from_secs(12 * 3600);

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
            INITDB_LOCALE_ARGS[0].as_ref(),
            INITDB_LOCALE_ARGS[1].as_ref(),
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

/// Restores the newest backup of `source` that ends before its target
/// with pgBackRest, recovers to the target from the source's archived WAL,
/// and promotes there; then the source's recovery settings are removed
/// and the passwords set to this cluster's. The source repository is only
/// read: this cluster archives to its own path once it runs.
pub async fn restore(
    ctx: &InstanceContext,
    desired: &DesiredState,
    source: &RestoreSource,
) -> Result<(), BootstrapError> {
    let staging = fresh_staging(ctx)?;
    let config = ctx.write_restore_config(source)?;
    let invocation = Invocation {
        config: &config,
        stanza: &source.cluster,
        env: ctx.restore_env(),
    };
    let args = pgbackrest::restore_args(&staging.display().to_string(), &source.target);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    archiving::run_with(ctx, &invocation, &args, RESTORE_TIMEOUT)
        .await
        .map_err(BootstrapError::Restore)?;
    ctx.write_config(&staging, desired, ReplicationRole::Primary)?;
    recover(ctx, &staging, &invocation.env, &source.target).await?;
    let _ = std::fs::remove_file(&config);
    datadir::promote_staging(&staging, &ctx.settings.pgdata)?;
    tracing::info!(source = %source.cluster, target = ?source.target, "restored");
    Ok(())
}

/// Runs the restored staging cluster on its unix socket only until its
/// recovery ends with a promotion, then removes the recovery settings
/// and sets this cluster's passwords, and stops it cleanly.
async fn recover(
    ctx: &InstanceContext,
    staging: &std::path::Path,
    env: &[(&'static str, &str)],
    target: &pgbackrest::RecoveryTarget,
) -> Result<(), BootstrapError> {
    let postmaster = start_private(ctx, staging, env)?;
    let result = async {
        // Recovery that ran out of WAL ends PostgreSQL: seen in its log
        // at once, whether or not the exit is noticed yet.
        let ran_out = async {
            while !postmaster.recovery_log().target_unreached {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        let promoted = tokio::select! {
            promoted = wait_promoted(ctx, postmaster.pid()) => promoted,
            () = ran_out => Err("PostgreSQL stopped during recovery".to_owned()),
        };
        let client = promoted.map_err(|error| {
            // A target past the archive is the owner's to fix: say so,
            // with the newest time the archive reaches.
            let told = postmaster
                .recovery_log()
                .target_past_archive(&target.to_string());
            BootstrapError::Restore(told.unwrap_or(error))
        })?;
        let resets: Vec<String> = pgbackrest::RECOVERY_SETTINGS
            .iter()
            .map(|setting| format!("ALTER SYSTEM RESET {setting}"))
            .collect();
        run_then_set_passwords(ctx, &client, resets).await
    }
    .await;
    postmaster.stop(ctx.settings.stop_timeout).await;
    result
}

/// Waits until the restored cluster whose postmaster is `pid` has ended
/// recovery with a promotion; a connection to it then. Errors say why
/// recovery did not end.
pub(crate) async fn wait_promoted(
    ctx: &InstanceContext,
    pid: i32,
) -> Result<tokio_postgres::Client, String> {
    let deadline = tokio::time::Instant::now() + RESTORE_TIMEOUT;
    loop {
        if !process_alive(pid) {
            return Err(
                "PostgreSQL stopped during recovery (a target past the archived WAL, \
                 or WAL missing from the repository): see its log"
                    .to_owned(),
            );
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("recovery did not end within {RESTORE_TIMEOUT:?}"));
        }
        if let Ok(client) = sql::connect(&ctx.local_target(), "postgres").await {
            let recovering = client
                .query_one("SELECT pg_is_in_recovery()", &[])
                .await
                .map(|row| row.get::<_, bool>(0));
            if matches!(recovering, Ok(false)) {
                return Ok(client);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Starts the staging cluster with `env` on its unix socket only: no
/// network, no waiting for standbys that do not exist yet, and no
/// archiving before the stanza exists (WAL from before the first base
/// backup restores nothing).
pub(crate) fn start_private(
    ctx: &InstanceContext,
    staging: &std::path::Path,
    env: &[(&'static str, &str)],
) -> Result<Postmaster, SupervisorError> {
    Postmaster::start(
        &ctx.user,
        &ctx.settings.bin_dir,
        staging,
        &[
            ("listen_addresses", ""),
            ("synchronous_standby_names", ""),
            ("archive_mode", "off"),
        ],
        env,
        None,
    )
}

/// Starts the staging cluster on its unix socket only, creates the roles
/// and the database, and stops it cleanly.
async fn create_roles(
    ctx: &InstanceContext,
    staging: &std::path::Path,
    desired: &DesiredState,
) -> Result<(), BootstrapError> {
    let postmaster = start_private(ctx, staging, &[])?;
    let result = async {
        let client = sql::wait_ready(&ctx.local_target(), Duration::from_secs(60)).await?;
        run_then_set_passwords(ctx, &client, role_statements(ctx, desired)).await
    }
    .await;
    postmaster.stop(ctx.settings.stop_timeout).await;
    result
}

/// Runs `statements`, then sets the roles' passwords to this cluster's.
async fn run_then_set_passwords(
    ctx: &InstanceContext,
    client: &tokio_postgres::Client,
    statements: Vec<String>,
) -> Result<(), BootstrapError> {
    for statement in statements {
        client
            .batch_execute(&statement)
            .await
            .map_err(SqlError::from)?;
    }
    passwords::converge(client, &ctx.settings.credentials).await?;
    Ok(())
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
    // With certificates: connected by address, verified by name.
    let (host, hostaddr) = ctx.remote_host(primary);
    let port = ctx.settings.postgres_port.to_string();
    tools::run_with(
        ctx,
        "pg_basebackup",
        hostaddr.map(|address| ("PGHOSTADDR", address)),
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
pub(crate) fn fresh_staging(ctx: &InstanceContext) -> Result<std::path::PathBuf, DataDirError> {
    ctx.prepare_run_dir()?;
    let staging = ctx.settings.staging_dir();
    datadir::remove_dir(&staging)?;
    ctx.user.private_dir(&staging)?;
    Ok(staging)
}
