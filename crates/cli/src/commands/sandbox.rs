//! `tusk sandbox up`: a Kubernetes-compatible control plane on this
//! machine, for laptops and CI where no cluster is at hand.
//!
//! It serves the API on 127.0.0.1 until interrupted and writes a
//! kubeconfig that kube-rs and kubectl use as it is. State lives in the
//! data directory and survives a restart.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tusk_sandbox::{Config, Sandbox};

use super::CommandError;
use super::sandbox_node::RuntimeKind;
use super::sandbox_operator::OperatorMode;
use crate::output::server_outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: SandboxCommand,
}

#[derive(clap::Subcommand)]
pub enum SandboxCommand {
    /// Start the sandbox and serve until interrupted.
    Up(UpArgs),
    /// Inject a fault into the running sandbox (or end one).
    Fault(super::sandbox_fault::FaultArgs),
    /// Run only the node (kubelet, volume provisioner, Service proxy)
    /// against a control plane the sandbox did not start.
    Node(super::sandbox_join::NodeArgs),
}

#[derive(clap::Args)]
pub struct UpArgs {
    /// Where state, credentials and the kubeconfig live [default:
    /// ~/.tusk/sandbox, or /var/lib/tusk/sandbox as root].
    #[arg(long, env = "TUSK_SANDBOX_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Port of the API server on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Do not run pods (API server only).
    #[arg(long)]
    pub no_kubelet: bool,
    /// Do not run the operator.
    #[arg(long, conflicts_with = "operator_in_process")]
    pub no_operator: bool,
    /// Run the operator inside `tusk sandbox up` with the admin credentials
    /// (for debugging) instead of installing it as a Deployment; implied by
    /// --no-kubelet, which runs no pods.
    #[arg(long)]
    pub operator_in_process: bool,
    /// Apply this manifest once the sandbox is up, and show its progress
    /// (repeatable).
    #[arg(long, value_name = "FILE")]
    pub apply: Vec<PathBuf>,
    /// How long a node may stop reporting before the node lifecycle
    /// controller marks it Unknown (kube-controller-manager's
    /// --node-monitor-grace-period), e.g. 40s, 500ms, 2m.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub node_monitor_grace_period: Duration,
    /// What runs pods: host processes, or containers of this machine's
    /// Docker engine from locally built images (scripts/build-images; the
    /// sandbox never pulls). docs/sandbox.md says what each enforces.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Process)]
    pub runtime: RuntimeKind,
}

/// A duration as Kubernetes flags write it, in one unit: `500ms`, `40s`,
/// `2m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (ms, s, m or h)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(number)),
        "s" => Ok(Duration::from_secs(number)),
        "m" => Ok(Duration::from_secs(number * 60)),
        "h" => Ok(Duration::from_secs(number * 3600)),
        other => Err(format!("unit {other:?} is not one of ms, s, m, h")),
    }
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    match &args.command {
        SandboxCommand::Up(up) => run_up(up),
        SandboxCommand::Fault(fault) => super::sandbox_fault::run(fault, default_data_dir),
        SandboxCommand::Node(node) => super::sandbox_join::run(node),
    }
}

pub fn default_data_dir() -> Result<PathBuf, CommandError> {
    // Pods run as their own users when the sandbox runs as root, and root's
    // home is closed to them.
    if tusk_sandbox::kubelet::running_as_root() {
        return Ok(PathBuf::from("/var/lib/tusk/sandbox"));
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".tusk/sandbox"))
        .ok_or_else(|| CommandError::Sandbox("HOME is not set; pass --data-dir".into()))
}

fn run_up(args: &UpArgs) -> Result<ExitCode, CommandError> {
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => default_data_dir()?,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(CommandError::Runtime)?;
    runtime.block_on(async {
        let mut config = Config::new(&data_dir);
        config.port = args.port;
        let mut sandbox = Sandbox::start(config)
            .await
            .map_err(|e| CommandError::Sandbox(e.to_string()))?;
        server_outln!(
            "tusk sandbox ready: https://{} (export KUBECONFIG={})",
            sandbox.address(),
            sandbox.kubeconfig_path().display()
        );
        let options = super::sandbox_node::NodeOptions {
            apply: args.apply.clone(),
            kubelet: !args.no_kubelet,
            runtime: args.runtime,
            node_monitor_grace_period: args.node_monitor_grace_period,
            operator: if args.no_operator {
                OperatorMode::None
            } else if args.operator_in_process || args.no_kubelet {
                OperatorMode::InProcess
            } else {
                OperatorMode::Pod
            },
        };
        let outcome = super::sandbox_node::run(&data_dir, sandbox.kubeconfig_path(), options).await;
        sandbox.stop();
        outcome?;
        Ok(ExitCode::SUCCESS)
    })
}
