//! The node side of `tusk sandbox up`: once the API server serves, install
//! the CRDs, start the kubelet, endpoints controller and Service proxy and
//! the operator in process, apply the given manifests, show what they
//! wait for, and on Ctrl-C stop every process that was started.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tusk_operator::config::OperatorConfig;
use tusk_operator::run::{Settings, run as run_operator};
use tusk_sandbox::converge;
use tusk_sandbox::node::Node;

use super::CommandError;

/// What to run beside the API server.
pub struct NodeOptions {
    pub apply: Vec<PathBuf>,
    pub kubelet: bool,
    pub operator: bool,
}

fn failed(error: impl std::fmt::Display) -> CommandError {
    CommandError::Sandbox(error.to_string())
}

async fn client_for(kubeconfig: &Path) -> Result<Client, CommandError> {
    tusk_sandbox::client::from_kubeconfig(kubeconfig)
        .await
        .map_err(failed)
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
        let tusk = std::env::current_exe().map_err(CommandError::Runtime)?;
        Some(Node::start(client.clone(), data_dir, kubeconfig, tusk).map_err(failed)?)
    } else {
        None
    };
    let (stop_operator, stop_signal) = watch::channel(false);
    let operator = if options.operator {
        let (uid, gid) = tusk_sandbox::kubelet::postgres_identity().ok_or_else(|| {
            failed("running as root needs a `postgres` user for PostgreSQL pods (scripts/setup installs PostgreSQL)")
        })?;
        let settings = Settings {
            config: OperatorConfig {
                postgres_uid: i64::from(uid),
                postgres_gid: i64::from(gid),
                ..OperatorConfig::default()
            },
            ..Settings::default()
        };
        Some(tokio::spawn(run_operator(
            client.clone(),
            settings,
            stop_signal,
        )))
    } else {
        None
    };
    let mut applied = Vec::new();
    for path in &options.apply {
        let documents = converge::read_manifests(path).map_err(failed)?;
        applied.extend(converge::apply(&client, &documents).await.map_err(failed)?);
        println!("applied {}", path.display());
    }
    println!("kubeconfig: {}", kubeconfig.display());
    println!(
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
                shown.map_err(CommandError::Runtime)?;
            }
            () = &mut stop => stopped = true,
        }
    }
    if !stopped {
        println!("running; Ctrl-C stops the sandbox and every process it started");
        stop.await;
    }
    println!("stopping every process the sandbox started");
    let _ = stop_operator.send(true);
    if let Some(operator) = operator {
        let _ = tokio::time::timeout(Duration::from_secs(30), operator).await;
    }
    if let Some(node) = node {
        node.shutdown().await;
    }
    Ok(())
}
