//! `tusk instance`: the instance manager inside every PostgreSQL pod.
//!
//! `tusk instance run` reads its identity from the environment (the pod
//! spec fills it from the downward API), credentials from mounted Secret
//! files and its desired state from its PostgresCluster, then runs until
//! SIGTERM. `tusk instance status` prints another instance's `/status`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tusk_instance::context::InstanceContext;
use tusk_instance::settings::{Credentials, Settings, UserSecret};
use tusk_instance::state::SharedState;

use super::CommandError;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: InstanceCommand,
}

#[derive(clap::Subcommand)]
pub enum InstanceCommand {
    /// Run the instance manager (the PostgreSQL container's entry point).
    Run(Box<RunArgs>),
    /// Print the `/status` report of an instance manager.
    Status(StatusArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// This pod's (instance's) name.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: String,
    /// This pod's namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
    /// The PostgresCluster this instance belongs to.
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster: String,
    /// This pod's IP: PostgreSQL and the HTTP API listen on it.
    #[arg(long, env = "POD_IP")]
    pub pod_ip: IpAddr,
    /// Data directory: a subdirectory of the volume (the bootstrap stages
    /// next to it and renames it into place).
    #[arg(long, env = "PGDATA")]
    pub pgdata: PathBuf,
    /// Directory holding postgres, initdb, pg_basebackup and pg_rewind.
    #[arg(long, env = "PG_BIN_DIR", default_value = "/usr/lib/postgresql/15/bin")]
    pub bin_dir: PathBuf,
    /// Short directory for the unix socket and the replication password file.
    #[arg(long, env = "TUSK_RUN_DIR", default_value = "/tmp/tusk")]
    pub run_dir: PathBuf,
    #[arg(long, env = "TUSK_POSTGRES_PORT", default_value_t = 5432)]
    pub port: u16,
    #[arg(long, env = "TUSK_HTTP_PORT", default_value_t = tusk_api::instance::DEFAULT_HTTP_PORT)]
    pub http_port: u16,
    /// Operating-system user PostgreSQL runs as when the manager is root.
    #[arg(long, env = "TUSK_OS_USER", default_value = "postgres")]
    pub os_user: String,
    /// Seconds a fast shutdown may take before it becomes immediate; keep
    /// it a few seconds under the pod's termination grace period.
    #[arg(long, env = "TUSK_STOP_TIMEOUT", default_value_t = 20)]
    pub stop_timeout_seconds: u64,
    /// Directory of the mounted credentials: one basic-auth Secret (files
    /// `username` and `password`) per user in `superuser/`, `app/` and
    /// `replication/`.
    #[arg(long, env = "TUSK_SECRETS_DIR", default_value = "/etc/tusk/secrets")]
    pub secrets_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Address of the instance manager's HTTP API; by default this pod's
    /// (`POD_IP` and `TUSK_HTTP_PORT`), since the API listens on the pod IP.
    #[arg(long)]
    pub address: Option<SocketAddr>,
    #[arg(long, env = "POD_IP", default_value = "127.0.0.1")]
    pub pod_ip: IpAddr,
    #[arg(long, env = "TUSK_HTTP_PORT", default_value_t = tusk_api::instance::DEFAULT_HTTP_PORT)]
    pub http_port: u16,
}

/// Runs the subcommand. Failures are reported here (as a log line and on
/// standard error) and turned into exit code 2.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return Ok(failed(&format!("cannot start the async runtime: {error}"))),
    };
    let outcome = match &args.command {
        InstanceCommand::Run(run_args) => runtime.block_on(run_manager(run_args)),
        InstanceCommand::Status(status_args) => runtime.block_on(print_status(status_args)),
    };
    Ok(match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => failed(&message),
    })
}

fn failed(message: &str) -> ExitCode {
    tracing::error!("{message}");
    eprintln!("error: {message}");
    ExitCode::from(2)
}

fn init_json_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_env_filter(filter)
        .try_init();
}

async fn run_manager(args: &RunArgs) -> Result<(), String> {
    init_json_logs();
    let secret =
        |user: &str| UserSecret::from_dir(&args.secrets_dir.join(user)).map_err(|e| e.to_string());
    let credentials = Credentials {
        superuser: secret("superuser")?,
        app_owner: secret("app")?,
        replication: secret("replication")?,
    };
    let settings = Settings {
        pod_name: args.pod_name.clone(),
        namespace: args.namespace.clone(),
        cluster_name: args.cluster.clone(),
        pod_ip: args.pod_ip,
        pgdata: args.pgdata.clone(),
        bin_dir: args.bin_dir.clone(),
        run_dir: args.run_dir.clone(),
        postgres_port: args.port,
        http_port: args.http_port,
        os_user: args.os_user.clone(),
        stop_timeout: Duration::from_secs(args.stop_timeout_seconds),
        credentials,
    };
    let ctx = InstanceContext::new(settings).map_err(|e| e.to_string())?;
    let desired =
        tusk_instance::cluster_watch::start(&args.namespace, &args.cluster, &args.pod_name)
            .await
            .map_err(|e| e.to_string())?;
    tracing::info!(
        instance = %args.pod_name,
        cluster = %args.cluster,
        namespace = %args.namespace,
        "instance manager starting"
    );
    tusk_instance::run::run_instance(ctx, desired, SharedState::default(), termination())
        .await
        .map_err(|e| e.to_string())
}

/// Resolves on SIGTERM (the kubelet stopping the pod) or SIGINT.
async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            tracing::error!("cannot listen for termination signals; stopping");
        }
    }
    tracing::info!("termination requested; stopping PostgreSQL");
}

async fn print_status(args: &StatusArgs) -> Result<(), String> {
    let address = args
        .address
        .unwrap_or_else(|| SocketAddr::new(args.pod_ip, args.http_port));
    let work = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream
            .write_all(
                format!(
                    "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                    tusk_api::instance::STATUS_PATH,
                    address
                )
                .as_bytes(),
            )
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .map_err(|_| format!("{address} did not answer in time"))?
        .map_err(|e| format!("cannot reach {address}: {e}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .ok_or_else(|| "malformed HTTP response".to_owned())?;
    let report: tusk_api::instance::InstanceReport =
        serde_json::from_str(body).map_err(|e| format!("unexpected /status answer: {e}"))?;
    let pretty = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    println!("{pretty}");
    Ok(())
}
