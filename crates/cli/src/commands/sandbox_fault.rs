//! `tusk sandbox fault ...`: inject faults into a running `tusk sandbox
//! up`, through its API server (`POST /sandbox/faults/{fault}`, with the
//! data directory's kubeconfig), the way tests inject them in process.

use std::path::PathBuf;
use std::process::ExitCode;

use tusk_sandbox::fault_client::{self, Fault, PodRef};
use tusk_sandbox::kubelet::Processes;
use tusk_sandbox::node::proxy::cuts::Direction;

use super::CommandError;
use crate::output::outln;

#[derive(clap::Args)]
pub struct FaultArgs {
    /// The running sandbox's data directory [default: as `tusk sandbox up`].
    #[arg(long, env = "TUSK_SANDBOX_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub fault: FaultCommand,
}

#[derive(clap::Args)]
pub struct PodArgs {
    /// The pod's namespace.
    #[arg(long, short, default_value = "default")]
    pub namespace: String,
    /// The pod.
    pub pod: String,
}

#[derive(clap::Args)]
pub struct ContainerArgs {
    #[command(flatten)]
    pub pod: PodArgs,
    /// The container [default: the pod's first].
    #[arg(long, short)]
    pub container: Option<String>,
}

#[derive(clap::Args)]
pub struct NodeArgs {
    /// The node.
    #[arg(long, default_value = "sandbox")]
    pub node: String,
}

#[derive(clap::Subcommand)]
pub enum FaultCommand {
    /// Cut the pod off from the API server: requests with its token go
    /// unanswered, its watches hear nothing.
    CutApi(PodArgs),
    /// End `cut-api`.
    HealApi(PodArgs),
    /// Cut the pod off from its Services' clients (traffic through the
    /// Service proxy to and/or from it is held back).
    CutService {
        #[command(flatten)]
        pod: PodArgs,
        /// ingress (clients to the pod), egress (the pod to clients) or both.
        #[arg(long, default_value = "both")]
        direction: Direction,
    },
    /// End `cut-service`.
    HealService(PodArgs),
    /// Cut the pod off from the other pods (packets between them are
    /// dropped, established connections included; the host still reaches
    /// it). Needs `--runtime docker`.
    CutPeers {
        #[command(flatten)]
        pod: PodArgs,
        /// ingress (peers to the pod), egress (the pod to peers) or both.
        #[arg(long, default_value = "both")]
        direction: Direction,
    },
    /// End `cut-peers`.
    HealPeers(PodArgs),
    /// SIGSTOP every process of a container.
    Freeze(ContainerArgs),
    /// SIGCONT after `freeze`.
    Thaw(ContainerArgs),
    /// SIGKILL every process of a container.
    Kill(ContainerArgs),
    /// The node stops reporting and acting, and its pods are cut off from
    /// the API server; the node lifecycle controller takes over.
    LoseNode {
        #[command(flatten)]
        node: NodeArgs,
        /// What happens to the node's processes: keep (a partition),
        /// freeze (a hung machine) or kill (a power loss).
        #[arg(long, default_value = "keep")]
        processes: Processes,
    },
    /// End `lose-node`.
    RestoreNode(NodeArgs),
}

fn pod(args: &PodArgs) -> PodRef {
    PodRef {
        namespace: args.namespace.clone(),
        name: args.pod.clone(),
    }
}

impl FaultCommand {
    fn fault(&self) -> Fault {
        let container = |c: &ContainerArgs| (pod(&c.pod), c.container.clone());
        match self {
            Self::CutApi(p) => Fault::CutApi(pod(p)),
            Self::HealApi(p) => Fault::HealApi(pod(p)),
            Self::CutService { pod: p, direction } => Fault::CutService(pod(p), *direction),
            Self::HealService(p) => Fault::HealService(pod(p)),
            Self::CutPeers { pod: p, direction } => Fault::CutPeers(pod(p), *direction),
            Self::HealPeers(p) => Fault::HealPeers(pod(p)),
            Self::Freeze(c) => Fault::Freeze(container(c).0, container(c).1),
            Self::Thaw(c) => Fault::Thaw(container(c).0, container(c).1),
            Self::Kill(c) => Fault::Kill(container(c).0, container(c).1),
            Self::LoseNode { node, processes } => Fault::LoseNode {
                node: node.node.clone(),
                processes: *processes,
            },
            Self::RestoreNode(node) => Fault::RestoreNode {
                node: node.node.clone(),
            },
        }
    }
}

/// Applies the fault to the sandbox whose data directory is
/// `--data-dir`, or the one `default_data_dir` gives (that of `tusk
/// sandbox up`).
pub fn run(
    args: &FaultArgs,
    default_data_dir: impl FnOnce() -> Result<PathBuf, CommandError>,
) -> Result<ExitCode, CommandError> {
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => default_data_dir()?,
    };
    let kubeconfig = data_dir.join("kubeconfig");
    let runtime = tokio::runtime::Runtime::new().map_err(CommandError::Runtime)?;
    runtime.block_on(async {
        let client = tusk_sandbox::client::from_kubeconfig(&kubeconfig)
            .await
            .map_err(|e| CommandError::Sandbox(e.to_string()))?;
        let message = fault_client::inject(&client, &args.fault.fault())
            .await
            .map_err(|e| CommandError::Sandbox(format!("the fault was not injected: {e}")))?;
        outln!("{message}")?;
        Ok(ExitCode::SUCCESS)
    })
}
