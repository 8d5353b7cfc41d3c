//! The node side of `tusk sandbox up`: once the API server serves, install
//! the CRDs, start the kubelet, the built-in controllers and Service proxy,
//! install the operator (or start it in process, see
//! [`super::sandbox_operator`]), apply the given manifests, show what they
//! wait for, and on Ctrl-C stop every process that was started.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tusk_sandbox::controllers::node_lifecycle::NodeLifecycleConfig;
use tusk_sandbox::converge;
use tusk_sandbox::node::Node;
use tusk_sandbox::node::kubelet::docker::DockerRuntime;
use tusk_sandbox::node::kubelet::{ContainerRuntime, KubeletConfig};

use super::CommandError;
use super::sandbox_operator::{self, OperatorMode};
use crate::output::server_outln;

/// What to run beside the API server.
pub struct NodeOptions {
    pub apply: Vec<PathBuf>,
    pub kubelet: bool,
    pub runtime: RuntimeKind,
    /// The node lifecycle controller's grace period.
    pub node_monitor_grace_period: Duration,
    pub operator: OperatorMode,
}

/// `--runtime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    Process,
    Docker,
}

fn failed(error: impl std::fmt::Display) -> CommandError {
    CommandError::Sandbox(error.to_string())
}

async fn client_for(kubeconfig: &Path) -> Result<Client, CommandError> {
    tusk_sandbox::client::from_kubeconfig(kubeconfig)
        .await
        .map_err(failed)
}

/// Once every applied object converged: how to connect to each applied
/// PostgresCluster.
async fn print_how_to_connect(client: &Client, applied: &[converge::Applied], kubeconfig: &Path) {
    for target in applied
        .iter()
        .filter(|a| a.resource.kind == "PostgresCluster")
    {
        let namespace = target.namespace.as_deref().unwrap_or("default");
        match super::psql::how_to_connect(client, namespace, &target.name, kubeconfig).await {
            Ok(text) => server_outln!("{text}"),
            Err(error) => eprintln!("cannot tell how to connect to {}: {error}", target.name),
        }
    }
}

/// Starts the kubelet (on the runtime asked for), the built-in
/// controllers and the Service proxy.
async fn start_node(
    client: &Client,
    data_dir: &Path,
    kubeconfig: &Path,
    options: &NodeOptions,
) -> Result<Node, CommandError> {
    let tusk = std::env::current_exe().map_err(CommandError::Runtime)?;
    let lifecycle = NodeLifecycleConfig {
        grace_period: options.node_monitor_grace_period,
        ..NodeLifecycleConfig::default()
    }
    .monitored_within_grace();
    let text = std::fs::read_to_string(kubeconfig).map_err(CommandError::Runtime)?;
    let mut config = KubeletConfig::new(data_dir, text, tusk).map_err(failed)?;
    if options.runtime == RuntimeKind::Docker {
        let runtime = DockerRuntime::connect(data_dir).await.map_err(failed)?;
        server_outln!(
            "pods run as Docker containers on network {} (gateway {})",
            runtime.network(),
            runtime.gateway()
        );
        config.runtime = ContainerRuntime::Docker(runtime);
    }
    let node = Node::start_configured(client.clone(), config, lifecycle);
    node.map_err(failed)
}

/// Runs the node side until Ctrl-C (or SIGTERM), then stops it.
pub async fn run(
    data_dir: &Path,
    kubeconfig: &Path,
    options: NodeOptions,
) -> Result<(), CommandError> {
    let client = client_for(kubeconfig).await?;
    converge::install_crds(&client).await.map_err(failed)?;
    let node = if options.kubelet {
        Some(start_node(&client, data_dir, kubeconfig, &options).await?)
    } else {
        None
    };
    let (stop_operator, stop_signal) = watch::channel(false);
    let mut applied = Vec::new();
    let operator = match options.operator {
        OperatorMode::InProcess => Some(sandbox_operator::start_in_process(&client, stop_signal)?),
        OperatorMode::Pod => {
            let as_is = options.runtime == RuntimeKind::Docker;
            applied.extend(sandbox_operator::install_operator(&client, as_is).await?);
            server_outln!("installed the operator (deployment tusk-system/tusk-operator)");
            if node.is_some() {
                sandbox_operator::wait_for_webhook(&client).await?;
                server_outln!("the operator serves its admission webhook");
            }
            None
        }
        OperatorMode::None => None,
    };
    for path in &options.apply {
        let documents = converge::read_manifests(path).map_err(failed)?;
        applied.extend(converge::apply(&client, &documents).await.map_err(failed)?);
        server_outln!("applied {}", path.display());
    }
    server_outln!("kubeconfig: {}", kubeconfig.display());
    server_outln!(
        "try: KUBECONFIG={} kubectl get pods -A",
        kubeconfig.display()
    );
    let mut stdout = std::io::stdout();
    let live = stdout.is_terminal();
    let stop = super::logging::wait_for_termination();
    tokio::pin!(stop);
    let mut stopped = false;
    if !applied.is_empty() {
        tokio::select! {
            shown = converge::show_progress(&client, &applied, &mut stdout, live) => {
                // A stdout that cannot be written ends the progress, not
                // the sandbox.
                if shown.is_ok() {
                    print_how_to_connect(&client, &applied, kubeconfig).await;
                }
            }
            () = &mut stop => stopped = true,
        }
    }
    if !stopped {
        server_outln!("running; Ctrl-C stops the sandbox and every process it started");
        stop.await;
    }
    server_outln!("stopping every process the sandbox started");
    let _ = stop_operator.send(true);
    if let Some(operator) = operator {
        let _ = tokio::time::timeout(Duration::from_secs(30), operator).await;
    }
    if let Some(node) = node {
        node.shutdown().await;
    }
    Ok(())
}
