//! The node side of the sandbox, started and stopped together: the
//! kubelet, the node lifecycle, endpoints, Deployment and ReplicaSet
//! controllers and the Service proxy.
//!
//! `tusk sandbox up` and tests start the API server first and hand this
//! module a client for it; stopping the node stops every process the
//! kubelet started, while pods stay in the API to come back on the next
//! start. [`Node::join`] runs the node against a control plane the
//! sandbox did not start (`tusk sandbox node`): the kubelet takes the pods
//! the cluster's scheduler binds to it, and kube-controller-manager runs
//! the controllers, but for the node lifecycle, which kube-up's leaves
//! out.

pub mod kubelet;
pub mod proxy;

use std::path::{Path, PathBuf};

use kube::Client;
use tokio::task::JoinHandle;

use crate::controllers::node_lifecycle::{self, NodeLifecycleConfig};
use kubelet::{KubeletConfig, KubeletError, KubeletFaults, KubeletHandle, PodAssignment};
use proxy::{EndpointSource, LocalAddresses};

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
        let addresses = local_addresses(&config);
        let kubelet = kubelet::start(client.clone(), config)?;
        let controllers = vec![
            tokio::spawn(node_lifecycle::run(client.clone(), lifecycle)),
            tokio::spawn(crate::controllers::endpoints::run(client.clone())),
            tokio::spawn(crate::controllers::deployment::run(client.clone())),
            tokio::spawn(crate::controllers::replicaset::run(client.clone())),
            tokio::spawn(proxy::run(
                client,
                kubelet.faults().service_cuts(),
                addresses,
                EndpointSource::Endpoints,
            )),
        ];
        Ok(Self {
            kubelet: Some(kubelet),
            controllers,
        })
    }

    /// Joins a control plane the sandbox did not start: the kubelet (pods
    /// come from the cluster's scheduler), its volume provisioner and the
    /// Service proxy (reading EndpointSlices, as kube-proxy does), and the node lifecycle controller when `lifecycle`
    /// is given (for a kube-controller-manager that runs none, as
    /// kube-up's). Garbage collection, endpoints, namespaces, Deployments
    /// and ReplicaSets are the control plane's.
    pub fn join(
        clients: JoinClients,
        mut config: KubeletConfig,
        lifecycle: Option<NodeLifecycleConfig>,
    ) -> Result<Self, KubeletError> {
        config.assignment = PodAssignment::Scheduler;
        let addresses = local_addresses(&config);
        let cluster = clients.cluster;
        let kubelet = kubelet::start_with_provisioner(clients.kubelet, cluster.clone(), config)?;
        let cuts = kubelet.faults().service_cuts();
        let slices = EndpointSource::EndpointSlices;
        let proxy = proxy::run(cluster.clone(), cuts, addresses, slices);
        let mut controllers = vec![tokio::spawn(proxy)];
        if let Some(lifecycle) = lifecycle {
            controllers.push(tokio::spawn(node_lifecycle::run(cluster, lifecycle)));
        }
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

/// The credentials of a node joining a control plane.
pub struct JoinClients {
    /// The kubelet's: on a cluster with the Node authorizer, a client
    /// certificate for `system:node:<name>` in group `system:nodes`.
    pub kubelet: Client,
    /// The provisioner's, the proxy's and the node lifecycle
    /// controller's: they create PersistentVolumes, bind claims, read
    /// every Service and Endpoints, and taint nodes, which a node may not.
    pub cluster: Client,
}

impl JoinClients {
    /// One client for everything (an admin's).
    pub fn same(client: Client) -> Self {
        Self {
            kubelet: client.clone(),
            cluster: client,
        }
    }
}

/// The Service addresses of the node's proxy, named after its data
/// directory as its Docker objects are.
fn local_addresses(config: &KubeletConfig) -> LocalAddresses {
    LocalAddresses::new(&kubelet::docker::sandbox_id(&config.data_dir))
}

impl Drop for Node {
    fn drop(&mut self) {
        for task in &self.controllers {
            task.abort();
        }
    }
}
