//! `tusk instance`: the instance manager inside every PostgreSQL pod.
//!
//! `tusk instance run` reads its identity from the environment (the pod
//! spec fills it from the downward API), credentials from mounted Secret
//! files and its desired state from its PostgresCluster, then runs until
//! SIGTERM. In the same environment, two one-shot commands write their
//! outcome to the termination message file: `tusk instance rehearse` runs
//! a restore rehearsal (a rehearsal pod's entry point), and `tusk instance
//! upgrade` upgrades the data volume to the image's major (the upgrade
//! pod's, `tusk_api::upgrade`), and `tusk instance upgrade-check` runs
//! `pg_upgrade --check` on a restore of the newest backup before an
//! upgrade stops anything (the pre-check pod's). `tusk instance status` prints another
//! instance's `/status`. `tusk instance watchdog` is the fence watchdog
//! `run` starts beside itself (`tusk_instance::fence`).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tusk_api::contract::{EnvironmentError, HTTP_PORT, InstanceEnv, InstanceEnvironment};
use tusk_api::instance::{InstanceReport, STATUS_PATH};
use tusk_instance::context::InstanceContext;
use tusk_instance::fence::Watchdog;
use tusk_instance::major_upgrade::{installed_major, precheck::PreCheck, volume::VolumeUpgrade};
use tusk_instance::primacy::{Guard, Primacy};
use tusk_instance::settings::{Credentials, Settings};
use tusk_instance::state::SharedState;

use super::{CommandError, logging};

/// How long `tusk instance status` waits for an answer.
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: InstanceCommand,
}

#[derive(clap::Subcommand)]
pub enum InstanceCommand {
    /// Run the instance manager (the PostgreSQL container's entry point).
    Run(Box<RunArgs>),
    /// Restore the cluster's newest backup into this pod's scratch volume,
    /// check it, and write the outcome to the file named by
    /// TUSK_REHEARSAL_RESULT (default /dev/termination-log).
    Rehearse(Box<RunArgs>),
    /// Upgrade the data volume to the major of PG_BIN_DIR's PostgreSQL
    /// with pg_upgrade --link, the old major's programs being in
    /// TUSK_UPGRADE_OLD_BIN_DIR, and write the outcome to the file named
    /// by TUSK_UPGRADE_RESULT (default /dev/termination-log). Exits 0 when
    /// the data is upgraded, 1 when a step failed, 2 when it cannot run.
    Upgrade(Box<RunArgs>),
    /// Before a major upgrade stops anything: restore the cluster's newest
    /// backup into this pod's scratch volume with the old major's programs
    /// (in TUSK_UPGRADE_OLD_BIN_DIR), run pg_upgrade --check on it to the
    /// major of PG_BIN_DIR, and write the outcome to the file named by
    /// TUSK_UPGRADE_RESULT. Exits 0 when the check passed, 1 when a step
    /// failed, 2 when it cannot run.
    UpgradeCheck(Box<RunArgs>),
    /// Print the `/status` report of an instance manager.
    Status(StatusArgs),
    /// The fence watchdog the instance manager starts beside itself: reads
    /// the lease's deadline from standard input and kills every
    /// PostgreSQL process working in PGDATA once it has passed.
    Watchdog(WatchdogArgs),
}

#[derive(clap::Args)]
pub struct WatchdogArgs {
    /// The instance's data directory.
    #[arg(long)]
    pub pgdata: std::path::PathBuf,
    #[command(flatten)]
    pub log: logging::LogArgs,
}

/// Every value comes from the environment the pod builder writes
/// (`tusk_api::contract::InstanceEnv`); a flag overrides its variable.
#[derive(clap::Args)]
pub struct RunArgs {
    /// This pod's (instance's) name [env: POD_NAME].
    #[arg(long)]
    pub pod_name: Option<String>,
    /// This pod's namespace [env: POD_NAMESPACE].
    #[arg(long)]
    pub namespace: Option<String>,
    /// The PostgresCluster this instance belongs to [env: CLUSTER_NAME].
    #[arg(long)]
    pub cluster: Option<String>,
    /// This pod's IP: PostgreSQL and the HTTP API listen on it [env: POD_IP].
    #[arg(long)]
    pub pod_ip: Option<String>,
    /// Data directory: a subdirectory of the volume (the bootstrap stages
    /// next to it and renames it into place) [env: PGDATA].
    #[arg(long)]
    pub pgdata: Option<String>,
    /// Directory holding postgres, initdb, pg_basebackup and pg_rewind
    /// [env: PG_BIN_DIR; default: /usr/lib/postgresql/15/bin].
    #[arg(long)]
    pub bin_dir: Option<String>,
    /// Short directory for the unix socket and the replication password
    /// file [env: TUSK_RUN_DIR; default: /tmp/tusk].
    #[arg(long)]
    pub run_dir: Option<String>,
    /// [env: TUSK_POSTGRES_PORT; default: 5432]
    #[arg(long)]
    pub port: Option<String>,
    /// [env: TUSK_HTTP_PORT; default: 8000]
    #[arg(long)]
    pub http_port: Option<String>,
    /// Operating-system user PostgreSQL runs as when the manager is root
    /// [env: TUSK_OS_USER; default: postgres].
    #[arg(long)]
    pub os_user: Option<String>,
    /// Seconds a fast shutdown may take before it becomes immediate; keep
    /// it a few seconds under the pod's termination grace period
    /// [env: TUSK_STOP_TIMEOUT; default: 20].
    #[arg(long)]
    pub stop_timeout_seconds: Option<String>,
    /// Directory of the mounted credentials: one basic-auth Secret (files
    /// `username` and `password`) per user in `superuser/`, `app/` and
    /// `replication/` [env: TUSK_SECRETS_DIR; default: /etc/tusk/secrets].
    #[arg(long)]
    pub secrets_dir: Option<String>,
    #[command(flatten)]
    pub log: logging::LogArgs,
}

impl RunArgs {
    /// The flag standing for environment variable `name`, if given.
    fn flag(&self, name: &str) -> Option<String> {
        let flag = match name {
            InstanceEnv::POD_NAME => &self.pod_name,
            InstanceEnv::POD_NAMESPACE => &self.namespace,
            InstanceEnv::CLUSTER_NAME => &self.cluster,
            InstanceEnv::POD_IP => &self.pod_ip,
            InstanceEnv::PGDATA => &self.pgdata,
            InstanceEnv::PG_BIN_DIR => &self.bin_dir,
            InstanceEnv::RUN_DIR => &self.run_dir,
            InstanceEnv::POSTGRES_PORT => &self.port,
            InstanceEnv::HTTP_PORT => &self.http_port,
            InstanceEnv::OS_USER => &self.os_user,
            InstanceEnv::STOP_TIMEOUT => &self.stop_timeout_seconds,
            InstanceEnv::SECRETS_DIR => &self.secrets_dir,
            _ => &None,
        };
        flag.clone()
    }

    /// Flags first, then the process environment, parsed by the contract.
    fn environment(&self) -> Result<InstanceEnvironment, EnvironmentError> {
        InstanceEnvironment::from_lookup(|name| {
            self.flag(name)
                .or_else(|| std::env::var(name).ok().filter(|v| !v.is_empty()))
        })
    }
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Address of the instance manager's HTTP API; by default this pod's
    /// (`POD_IP` and `TUSK_HTTP_PORT`), since the API listens on the pod IP.
    #[arg(long)]
    pub address: Option<SocketAddr>,
    #[arg(long, env = InstanceEnv::POD_IP, default_value = "127.0.0.1")]
    pub pod_ip: IpAddr,
    #[arg(long, env = InstanceEnv::HTTP_PORT, default_value_t = HTTP_PORT)]
    pub http_port: u16,
}

/// Runs the subcommand. Failures are reported here (through the logger
/// once it is installed, else on standard error) and turned into exit code 2.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    if let InstanceCommand::Watchdog(watchdog) = &args.command {
        return Ok(run_watchdog(watchdog));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return Ok(failed(&format!("cannot start the async runtime: {error}"))),
    };
    let done = |outcome: Result<(), String>| outcome.map(|()| ExitCode::SUCCESS);
    let outcome = match &args.command {
        InstanceCommand::Run(run_args) => done(runtime.block_on(run_manager(run_args))),
        InstanceCommand::Rehearse(run_args) => done(runtime.block_on(rehearse(run_args))),
        InstanceCommand::Upgrade(run_args) => runtime.block_on(upgrade(run_args)),
        InstanceCommand::UpgradeCheck(run_args) => runtime.block_on(upgrade_check(run_args)),
        InstanceCommand::Status(status_args) => done(runtime.block_on(print_status(status_args))),
        InstanceCommand::Watchdog(watchdog) => Ok(run_watchdog(watchdog)),
    };
    Ok(outcome.unwrap_or_else(|message| failed(&message)))
}

/// Reports a failure through the logger once `run` installed it (so a JSON
/// log stays one object a line), on standard error before.
fn failed(message: &str) -> ExitCode {
    if tracing::dispatcher::has_been_set() {
        tracing::error!("{message}");
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::from(2)
}

/// What `run`, `rehearse` and `upgrade` start from: the environment read, the
/// logger installed, the credentials read.
struct Started {
    ctx: InstanceContext,
    namespace: String,
    cluster: String,
    me: String,
    /// Where the pod mounts its repositories' CAs and volumes.
    dirs: tusk_api::contract::MountDirs,
}

fn start(args: &RunArgs) -> Result<Started, String> {
    let env = match args.environment() {
        Ok(env) => env,
        Err(error) => {
            logging::init(args.log.log_format, &[]);
            return Err(error.to_string());
        }
    };
    // Every JSON line names the instance, whichever task logs it.
    logging::init(
        args.log.log_format,
        &[
            ("cluster", &env.cluster_name),
            ("namespace", &env.namespace),
            ("instance", &env.pod_name),
        ],
    );
    let credentials = Credentials::read(&env.secrets_dir).map_err(|e| e.to_string())?;
    let (namespace, cluster, me) = (
        env.namespace.clone(),
        env.cluster_name.clone(),
        env.pod_name.clone(),
    );
    let dirs = tusk_api::contract::MountDirs {
        secrets: env.secrets_dir.clone(),
        repositories: env.repositories_dir.clone(),
    };
    let settings = Settings::from_environment(env, credentials);
    let ctx = InstanceContext::new(settings).map_err(|e| e.to_string())?;
    Ok(Started {
        ctx,
        namespace,
        cluster,
        me,
        dirs,
    })
}

async fn run_manager(args: &RunArgs) -> Result<(), String> {
    let Started {
        ctx,
        namespace,
        cluster,
        me,
        dirs,
    } = start(args)?;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
    let desired = tusk_instance::cluster_watch::start_with_client(
        client.clone(),
        &namespace,
        &cluster,
        &me,
        &dirs,
    );
    let state = SharedState::default();
    let guard = Guard {
        pgdata: ctx.settings.pgdata.clone(),
        watchdog: Some(start_watchdog(&ctx)?),
    };
    let primacy = Primacy::lease(client, &namespace, &cluster, &me, state.clone(), guard);
    tracing::info!(
        instance = %me,
        cluster = %cluster,
        namespace = %namespace,
        "instance manager starting"
    );
    let termination = async {
        logging::wait_for_termination().await;
        tracing::info!("termination requested; stopping PostgreSQL");
    };
    tusk_instance::run::run_instance(ctx, desired, state, primacy, termination)
        .await
        .map_err(|e| e.to_string())
}

/// Starts this binary's `instance watchdog` beside the manager.
fn start_watchdog(ctx: &InstanceContext) -> Result<Watchdog, String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to start the fence watchdog: {e}"))?;
    Watchdog::start(&program, &ctx.settings.pgdata, &ctx.user).map_err(|e| e.to_string())
}

/// The fence watchdog's loop (`tusk_instance::fence::watchdog`), with the
/// heartbeat on standard input. No async runtime: it shares nothing with
/// the manager that a hang there could stall.
fn run_watchdog(args: &WatchdogArgs) -> ExitCode {
    // The names the manager's lines carry, passed on by the manager.
    let named = [
        ("cluster", InstanceEnv::CLUSTER_NAME),
        ("namespace", InstanceEnv::POD_NAMESPACE),
        ("instance", InstanceEnv::POD_NAME),
    ]
    .map(|(field, name)| (field, std::env::var(name).unwrap_or_default()));
    let fixed: Vec<(&str, &str)> = named
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(field, value)| (*field, value.as_str()))
        .collect();
    logging::init(args.log.log_format, &fixed);
    let heartbeat = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(error) => return failed(&format!("cannot read the heartbeat: {error}")),
    };
    match tusk_instance::fence::watchdog::run(&args.pgdata, &heartbeat) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => failed(&error.to_string()),
    }
}

/// Runs a restore rehearsal and writes its outcome (JSON) to the result
/// file, where Kubernetes picks it up as the termination message. A
/// rehearsal that ran exits 0 whatever it found; one that could not run
/// writes why and exits 2.
async fn rehearse(args: &RunArgs) -> Result<(), String> {
    let write = |text: &str| write_result(tusk_api::rehearsal::RESULT_ENV, "rehearsal", text);
    let outcome = async {
        let started = start(args)?;
        let desired = desired_once(&started).await?;
        tracing::info!(cluster = %started.cluster, "restore rehearsal starting");
        Ok::<_, String>(tusk_instance::rehearsal::rehearse(&started.ctx, &desired).await)
    }
    .await;
    match outcome {
        Ok(outcome) => {
            tracing::info!(succeeded = outcome.succeeded(), failed_check = ?outcome.failed_check, message = %outcome.message, backup = ?outcome.backup_id, seconds = outcome.duration_seconds, "restore rehearsal finished");
            write(&outcome.to_message());
            Ok(())
        }
        Err(message) => {
            write(&message);
            Err(message)
        }
    }
}

/// The cluster's declared state for this one-shot pod, read once.
async fn desired_once(started: &Started) -> Result<tusk_instance::desired::DesiredState, String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
    let clusters: kube::Api<tusk_api::v1alpha1::PostgresCluster> =
        kube::Api::namespaced(client, &started.namespace);
    let cluster = clusters
        .get(&started.cluster)
        .await
        .map_err(|e| format!("cannot read PostgresCluster {}: {e}", started.cluster))?;
    Ok(tusk_instance::cluster_watch::desired_from_cluster(
        &cluster,
        &started.dirs,
        &started.me,
        None,
        None,
    ))
}

/// Writes a one-shot command's outcome to the file named by `result_env`
/// (the termination message file by default).
fn write_result(result_env: &str, what: &str, text: &str) {
    let file = std::env::var(result_env)
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| tusk_api::rehearsal::TERMINATION_MESSAGE_PATH.to_owned());
    if let Err(error) = std::fs::write(&file, text) {
        tracing::error!(%error, %file, "cannot write the {what}'s outcome");
    }
}

/// Upgrades the data volume (`tusk_api::upgrade`) and writes the outcome
/// (JSON) to the result file: exit code 0 when the data is upgraded, 1
/// when a step failed, 2 (with an outcome saying why) when the upgrade
/// could not run.
async fn upgrade(args: &RunArgs) -> Result<ExitCode, String> {
    use tusk_api::upgrade::{Outcome, RESULT_ENV, Step};
    let started = Instant::now();
    let write = |outcome: &Outcome| write_result(RESULT_ENV, "upgrade", &outcome.to_message());
    let (user, volume) = match upgrade_of_volume(args).await {
        Ok(prepared) => prepared,
        Err(message) => {
            let pgdata = args.environment().ok().map(|env| env.pgdata);
            write(&Outcome {
                from_version: None,
                data_version: pgdata
                    .and_then(|p| tusk_instance::datadir::data_major_version(&p).ok()),
                // Nothing was changed, as after a failed first step.
                failed_step: Some(Step::Prepare),
                message: message.clone(),
                duration_seconds: started.elapsed().as_secs_f64(),
            });
            return Err(message);
        }
    };
    tracing::info!(data = %volume.pgdata.display(), to = volume.new_major, "major upgrade starting");
    let mut outcome = volume.run(&user).await;
    outcome.duration_seconds = started.elapsed().as_secs_f64();
    let failed_step = outcome.failed_step.map(|step| step.as_str());
    tracing::info!(failed_step, message = %outcome.message, from = ?outcome.from_version, data = ?outcome.data_version, seconds = outcome.duration_seconds, "major upgrade finished");
    write(&outcome);
    Ok(match outcome.failed_step {
        None => ExitCode::SUCCESS,
        Some(_) => ExitCode::from(1),
    })
}

/// The pre-check (`tusk_api::upgrade`): `pg_upgrade --check` on a restore
/// of the newest backup; the outcome (JSON) goes to the result file, and
/// the exit code is as `upgrade`'s.
async fn upgrade_check(args: &RunArgs) -> Result<ExitCode, String> {
    use tusk_api::upgrade::{Outcome, RESULT_ENV, Step};
    let started_at = Instant::now();
    let write = |outcome: &Outcome| write_result(RESULT_ENV, "pre-check", &outcome.to_message());
    let prepared = async {
        let started = start(args)?;
        let (old_bin, new_major) = upgrade_programs(&started.ctx).await?;
        let desired = desired_once(&started).await?;
        let check = PreCheck {
            old_bin,
            new_bin: started.ctx.settings.bin_dir.clone(),
            new_major,
            work_dir: started.ctx.settings.run_dir.join("upgrade"),
        };
        Ok::<_, String>((started.ctx, desired, check))
    };
    let (ctx, desired, check) = match prepared.await {
        Ok(prepared) => prepared,
        Err(message) => {
            write(&Outcome {
                from_version: None,
                data_version: None,
                failed_step: Some(Step::Restore),
                message: message.clone(),
                duration_seconds: started_at.elapsed().as_secs_f64(),
            });
            return Err(message);
        }
    };
    tracing::info!(to = check.new_major, "major upgrade pre-check starting");
    let mut outcome = check.run(&ctx, &desired).await;
    outcome.duration_seconds = started_at.elapsed().as_secs_f64();
    let failed_step = outcome.failed_step.map(|step| step.as_str());
    tracing::info!(failed_step, message = %outcome.message, from = ?outcome.from_version, seconds = outcome.duration_seconds, "major upgrade pre-check finished");
    write(&outcome);
    Ok(match outcome.failed_step {
        None => ExitCode::SUCCESS,
        Some(_) => ExitCode::from(1),
    })
}

/// The old major's programs (`TUSK_UPGRADE_OLD_BIN_DIR`) and the major
/// of `PG_BIN_DIR`'s, with the run directory made reachable for the
/// PostgreSQL user (the work directory is made inside it).
async fn upgrade_programs(ctx: &InstanceContext) -> Result<(std::path::PathBuf, u32), String> {
    use tusk_api::upgrade::OLD_BIN_DIR_ENV;
    let old_bin = std::env::var(OLD_BIN_DIR_ENV)
        .ok()
        .filter(|dir| !dir.is_empty())
        .ok_or_else(|| {
            format!("{OLD_BIN_DIR_ENV} names no directory of the old major's programs")
        })?;
    let new_major = installed_major(&ctx.user, &ctx.settings.bin_dir)
        .await
        .map_err(|e| e.to_string())?;
    ctx.user
        .private_dir(&ctx.settings.run_dir)
        .map_err(|e| e.to_string())?;
    Ok((old_bin.into(), new_major))
}

/// The upgrade the pod's environment describes: to the major of
/// `PG_BIN_DIR`, from the programs in `TUSK_UPGRADE_OLD_BIN_DIR`.
async fn upgrade_of_volume(
    args: &RunArgs,
) -> Result<(tusk_instance::process_user::ProcessUser, VolumeUpgrade), String> {
    let Started { ctx, .. } = start(args)?;
    let (old_bin, new_major) = upgrade_programs(&ctx).await?;
    let settings = &ctx.settings;
    let volume = VolumeUpgrade {
        pgdata: settings.pgdata.clone(),
        old_bin,
        new_bin: settings.bin_dir.clone(),
        new_major,
        superuser: settings.credentials.superuser.username.clone(),
        work_dir: settings.run_dir.join("upgrade"),
    };
    Ok((ctx.user.clone(), volume))
}

async fn print_status(args: &StatusArgs) -> Result<(), String> {
    let address = args
        .address
        .unwrap_or_else(|| SocketAddr::new(args.pod_ip, args.http_port));
    let url = format!("http://{address}{STATUS_PATH}");
    let answer = async {
        reqwest::Client::new()
            .get(&url)
            .timeout(STATUS_TIMEOUT)
            .send()
            .await?
            .error_for_status()?
            .json::<InstanceReport>()
            .await
    };
    let report = answer.await.map_err(|error| {
        if error.is_timeout() {
            format!("{address} did not answer in time")
        } else if error.is_decode() {
            format!("unexpected /status answer: {error}")
        } else {
            format!("cannot reach {address}: {error}")
        }
    })?;
    let pretty = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    match crate::output::outln!("{pretty}") {
        Err(error) if !crate::output::is_closed(&error) => Err(error.to_string()),
        _ => Ok(()),
    }
}
