//! `tusk sandbox node --kubeconfig FILE`: the sandbox's node side alone
//! (the kubelet with its volume provisioner, and the Service proxy),
//! joined to a control plane it did not start, such as kube-up's
//! kube-apiserver, kube-controller-manager and kube-scheduler.
//!
//! The kubelet registers a Node, renews its Lease, runs the pods the
//! scheduler binds to it and reports their status; the proxy serves the
//! cluster's Service addresses on this machine. None of the sandbox's
//! controllers run (kube-controller-manager does garbage collection,
//! endpoints, namespaces, Deployments), but for the node lifecycle, which
//! kube-up's kube-controller-manager leaves out (`--no-node-lifecycle`
//! where it runs one).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tusk_sandbox::controllers::node_lifecycle::NodeLifecycleConfig;
use tusk_sandbox::node::kubelet::docker::DockerRuntime;
use tusk_sandbox::node::kubelet::{ContainerRuntime, KubeletConfig};
use tusk_sandbox::node::{JoinClients, Node};

use super::CommandError;
use super::sandbox_node::RuntimeKind;
use crate::output::server_outln;

#[derive(clap::Args)]
pub struct NodeArgs {
    /// The control plane to join: a kubeconfig whose credentials may
    /// manage Nodes, Pods' status, PersistentVolumes and their claims,
    /// and read Services and EndpointSlices (an admin's, on kube-up).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// The kubelet's own credentials [default: --kubeconfig's]: on a
    /// cluster with the Node authorizer, a client certificate for
    /// `system:node:<node name>` in group `system:nodes`, signed by the
    /// cluster's CA. The volume provisioner, the proxy and the node
    /// lifecycle controller keep --kubeconfig's.
    #[arg(long, value_name = "FILE")]
    pub kubelet_kubeconfig: Option<PathBuf>,
    /// Serve `pods/log` to kube-apiserver over HTTPS, letting in callers
    /// whose client certificate this CA signed (the kubelet's
    /// --client-ca-file; kube-apiserver presents one with
    /// --kubelet-client-certificate). Exec is served over WebSocket only,
    /// and kube-apiserver calls kubelets with SPDY. Without this flag the
    /// endpoint expects the sandbox API server's bearer token, which
    /// kube-apiserver lacks.
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Where pods, volumes and `images.yaml` live [default: as `tusk
    /// sandbox up`].
    #[arg(long, env = "TUSK_SANDBOX_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The Node's name.
    #[arg(long, default_value = "sandbox")]
    pub node_name: String,
    /// What runs pods. A real API server refuses loopback addresses in
    /// Endpoints, so only Docker's pods can back Services there.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Docker)]
    pub runtime: RuntimeKind,
    /// Do not run the node lifecycle controller (for a control plane whose
    /// kube-controller-manager runs its own).
    #[arg(long)]
    pub no_node_lifecycle: bool,
    /// How long the node may stop reporting before the node lifecycle
    /// controller marks it Unknown, e.g. 40s.
    #[arg(long, default_value = "40s", value_parser = super::sandbox::parse_duration)]
    pub node_monitor_grace_period: Duration,
}

fn failed(error: impl std::fmt::Display) -> CommandError {
    CommandError::Sandbox(error.to_string())
}

pub fn run(args: &NodeArgs) -> Result<ExitCode, CommandError> {
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => super::sandbox::default_data_dir()?,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(CommandError::Runtime)?;
    runtime.block_on(async {
        let cluster = tusk_sandbox::client::from_kubeconfig(&args.kubeconfig)
            .await
            .map_err(failed)?;
        let kubelet_kubeconfig = args.kubelet_kubeconfig.as_ref().unwrap_or(&args.kubeconfig);
        let kubelet = tusk_sandbox::client::from_kubeconfig(kubelet_kubeconfig)
            .await
            .map_err(failed)?;
        let tusk = std::env::current_exe().map_err(CommandError::Runtime)?;
        let text = std::fs::read_to_string(kubelet_kubeconfig).map_err(CommandError::Runtime)?;
        let mut config = KubeletConfig::new(&data_dir, text, tusk).map_err(failed)?;
        config.node_name = args.node_name.clone();
        if let Some(path) = &args.client_ca_file {
            config.client_ca = Some(std::fs::read_to_string(path).map_err(CommandError::Runtime)?);
        }
        if args.runtime == RuntimeKind::Docker {
            let docker = DockerRuntime::connect(&data_dir).await.map_err(failed)?;
            server_outln!(
                "pods run as Docker containers on network {} (gateway {})",
                docker.network(),
                docker.gateway()
            );
            config.runtime = ContainerRuntime::Docker(docker);
        }
        let lifecycle = (!args.no_node_lifecycle).then(|| {
            NodeLifecycleConfig {
                grace_period: args.node_monitor_grace_period,
                ..NodeLifecycleConfig::default()
            }
            .monitored_within_grace()
        });
        let clients = JoinClients { kubelet, cluster };
        let node = Node::join(clients, config, lifecycle).map_err(failed)?;
        server_outln!(
            "node {} joined the control plane of {}; Ctrl-C stops it and every container it started",
            args.node_name,
            args.kubeconfig.display()
        );
        super::logging::wait_for_termination().await;
        server_outln!("stopping node {}", args.node_name);
        node.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
