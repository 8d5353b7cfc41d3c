//! The node side of the sandbox, started and stopped together: the
//! kubelet, the node lifecycle, endpoints, Deployment and ReplicaSet
//! controllers and the Service proxy.
//!
//! `tusk sandbox up` and tests start the API server first and hand this
//! module a client for it; stopping the node stops every process the
//! kubelet started, while pods stay in the API to come back on the next
//! start.

pub mod kubelet;
pub mod proxy;

use std::path::{Path, PathBuf};

use kube::Client;
use tokio::task::JoinHandle;

use crate::controllers::node_lifecycle::{self, NodeLifecycleConfig};
use kubelet::{KubeletConfig, KubeletError, KubeletFaults, KubeletHandle};

/// A running node.
pub struct Node {
    kubelet: Option<KubeletHandle>,
    controllers: Vec<JoinHandle<()>>,
}

impl Node {
    /// Starts the node for the sandbox in `data_dir`, whose admin
    /// kubeconfig is `kubeconfig` (pods get a copy), with `tusk_binary`
    /// standing for the Tusk image.
    pub fn start(
        client: Client,
        data_dir: &Path,
        kubeconfig: &Path,
        tusk_binary: PathBuf,
    ) -> Result<Self, KubeletError> {
        let lifecycle = NodeLifecycleConfig::default();
        Self::start_with_lifecycle(client, data_dir, kubeconfig, tusk_binary, lifecycle)
    }

    /// As [`Node::start`], with the node lifecycle controller's timings.
    pub fn start_with_lifecycle(
        client: Client,
        data_dir: &Path,
        kubeconfig: &Path,
        tusk_binary: PathBuf,
        lifecycle: NodeLifecycleConfig,
    ) -> Result<Self, KubeletError> {
        let text =
            std::fs::read_to_string(kubeconfig).map_err(|source| KubeletError::Kubeconfig {
                path: kubeconfig.to_owned(),
                source,
            })?;
        let config = KubeletConfig::new(data_dir, text, tusk_binary)?;
        Self::start_configured(client, config, lifecycle)
    }

    pub fn start_with(client: Client, config: KubeletConfig) -> Result<Self, KubeletError> {
        Self::start_configured(client, config, NodeLifecycleConfig::default())
    }

    /// As [`Node::start_with`], with the node lifecycle controller's
    /// timings (tests shorten Kubernetes' 40 s grace period).
    pub fn start_configured(
        client: Client,
        config: KubeletConfig,
        lifecycle: NodeLifecycleConfig,
    ) -> Result<Self, KubeletError> {
        let kubelet = kubelet::start(client.clone(), config)?;
        let controllers = vec![
            tokio::spawn(node_lifecycle::run(client.clone(), lifecycle)),
            tokio::spawn(crate::controllers::endpoints::run(client.clone())),
            tokio::spawn(crate::controllers::deployment::run(client.clone())),
            tokio::spawn(crate::controllers::replicaset::run(client.clone())),
            tokio::spawn(crate::node::proxy::run(
                client,
                kubelet.faults().service_cuts(),
            )),
        ];
        Ok(Self {
            kubelet: Some(kubelet),
            controllers,
        })
    }

    pub fn faults(&self) -> KubeletFaults {
        self.kubelet
            .as_ref()
            .map(KubeletHandle::faults)
            .unwrap_or_default()
    }

    /// Stops the proxy and controllers, then every container gracefully.
    pub async fn shutdown(mut self) {
        for task in &self.controllers {
            task.abort();
        }
        if let Some(kubelet) = self.kubelet.take() {
            kubelet.shutdown().await;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for task in &self.controllers {
            task.abort();
        }
    }
}
