//! pgBackRest's TLS server (`pgbackrest server`), through which a standby
//! takes a base backup of its primary ([`tusk_postgres::pgbackrest::server`]).
//!
//! It runs on every instance of a cluster that archives WAL, whatever its
//! role (a standby's server is idle; it is there the moment the instance
//! is promoted), as the PostgreSQL user, listening on the pod's address at
//! [`BACKUP_SERVER_PORT`]. It presents the cluster's server certificate,
//! and runs only while that certificate names the pod's address: the
//! operator adds each instance pod's address to it once the pod has one,
//! and pgBackRest's client verifies the server by the address it connects
//! to. A renewed certificate (a new pod address, a renewal) restarts the
//! server, which reads its files once when it starts; so does an exit,
//! after a growing delay. While it runs, `/status` reports where
//! (`backupServer`), and only then does the operator assign a backup to a
//! standby of this primary.

use std::path::Path;
use std::time::Duration;

use tokio::process::Child;
use tokio::time::Instant;
use tusk_api::contract::BACKUP_SERVER_PORT;
use tusk_api::v1alpha1::BackupServer as ServerReport;
use tusk_postgres::pgbackrest;

use crate::context::InstanceContext;
use crate::desired::DesiredState;
use crate::state::SharedState;
use crate::supervisor::Backoff;
use crate::tls::Mounted;

/// The server process, and the certificate it was started with.
pub struct BackupServer {
    running: Option<(Child, Mounted)>,
    retry_at: Option<Instant>,
    backoff: Backoff,
    /// Why it does not run, as last logged.
    logged: Option<String>,
}

impl Default for BackupServer {
    fn default() -> Self {
        BackupServer {
            running: None,
            retry_at: None,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
            logged: None,
        }
    }
}

impl BackupServer {
    /// One look, from the convergence loop: starts, restarts or stops the
    /// server, and publishes where it listens. Never waits.
    pub fn converge(&mut self, ctx: &InstanceContext, desired: &DesiredState, state: &SharedState) {
        let wanted = match wanted(ctx, desired) {
            Ok(mounted) => Some(mounted),
            Err(why) => {
                if self.logged.as_deref() != Some(why.as_str()) {
                    tracing::info!(reason = %why, "pgBackRest's TLS server does not run");
                    self.logged = Some(why);
                }
                None
            }
        };
        self.collect_exit();
        let current = self.running.as_ref().map(|(_, mounted)| mounted);
        if current.is_some() && current != wanted.as_ref() {
            // Stopped: not wanted any more, or its certificate changed.
            self.running = None;
        }
        let due = self.retry_at.is_none_or(|at| Instant::now() >= at);
        if let (None, Some(mounted), true) = (&self.running, wanted, due) {
            match start(ctx) {
                Ok(child) => {
                    tracing::info!(port = BACKUP_SERVER_PORT, "pgBackRest's TLS server started");
                    self.logged = None;
                    self.running = Some((child, mounted));
                }
                Err(error) => self.retry_later(&error),
            }
        }
        state.lock().backup_server = self.running.as_ref().map(|_| served(ctx));
    }

    /// Forgets a server that exited, to start it again after a delay.
    fn collect_exit(&mut self) {
        let Some((child, _)) = self.running.as_mut() else {
            return;
        };
        let exit = match child.try_wait() {
            Ok(None) => return,
            Ok(Some(status)) => status.to_string(),
            Err(error) => error.to_string(),
        };
        self.running = None;
        self.retry_later(&format!("pgbackrest server exited: {exit}"));
    }

    fn retry_later(&mut self, error: &str) {
        let delay = self.backoff.next_delay();
        tracing::warn!(%error, retry_in_seconds = delay.as_secs(), "pgBackRest's TLS server is not running");
        self.retry_at = Some(Instant::now() + delay);
    }
}

/// The server as `/status` reports it: where it listens, and this
/// instance's PostgreSQL, which a standby's pgBackRest names as its
/// primary (`pg2`).
fn served(ctx: &InstanceContext) -> ServerReport {
    let settings = &ctx.settings;
    ServerReport {
        address: std::net::SocketAddr::new(settings.pod_ip, BACKUP_SERVER_PORT).to_string(),
        data_directory: settings.pgdata.display().to_string(),
        socket_directory: tusk_postgres::config::socket_dir_setting(&settings.run_dir),
        port: settings.postgres_port,
    }
}

/// The mounted certificates the server is to run with; why it is not to
/// run otherwise.
fn wanted(ctx: &InstanceContext, desired: &DesiredState) -> Result<Mounted, String> {
    if desired.archiving.is_none() {
        return Err("the cluster archives no WAL".to_owned());
    }
    if ctx.tls().is_none() {
        return Err("no certificate is mounted, or PostgreSQL has no TLS".to_owned());
    }
    let mounted = Mounted::read(&ctx.settings.secrets_dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no certificate is mounted".to_owned())?;
    if !mounted.server_names(ctx.settings.pod_ip) {
        return Err(format!(
            "the cluster's server certificate does not name this pod's address {} yet",
            ctx.settings.pod_ip
        ));
    }
    Ok(mounted)
}

fn start(ctx: &InstanceContext) -> Result<Child, String> {
    let installed = ctx
        .tls()
        .ok_or_else(|| "no certificate is installed".to_owned())?;
    // The private copies the server reads are the ones just compared.
    ctx.install_certificates().map_err(|e| e.to_string())?;
    let config = ctx.pgbackrest_config().display().to_string();
    let args = pgbackrest::server_args(
        ctx.settings.pod_ip,
        BACKUP_SERVER_PORT,
        &installed.backup_server(),
        &ctx.settings.cluster_name,
    );
    ctx.user
        .command(Path::new(pgbackrest::PROGRAM))
        .arg(format!("--config={config}"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start pgbackrest server: {e}"))
}
