//! The Node this kubelet stands for, and the Lease that says it is alive.
//!
//! Controllers, the scheduler and `kubectl get nodes` read the Node's
//! capacity, allocatable resources and conditions (`conditions`); the
//! node lifecycle reads the Lease in `kube-node-lease`. The kubelet
//! renews both on a heartbeat, so a stopped sandbox shows as a stale node
//! rather than a healthy one. Every request here is one a kubelet makes
//! for its own Node and Lease, so the Node authorizer admits them.

mod conditions;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::node_loss::NodeLoss;
use super::status::now;
use conditions::{MEMORY_RESERVE_BYTES, Transitions, meminfo_bytes};

const LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the machine has, and what pods may use of it: all of it but the
/// memory the kubelet keeps back for eviction.
fn resources() -> (serde_json::Value, serde_json::Value) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory = meminfo_bytes("MemTotal").unwrap_or(0);
    let amounts = |memory: u64| {
        json!({
            "cpu": cpus.to_string(),
            "memory": format!("{}Ki", memory / 1024),
            "pods": "110",
            "ephemeral-storage": "100Gi",
        })
    };
    (
        amounts(memory),
        amounts(memory.saturating_sub(MEMORY_RESERVE_BYTES)),
    )
}

/// Creates the Node (when absent) and writes its status.
async fn register(
    client: &Client,
    name: &str,
    port: u16,
    conditions: &mut Transitions,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes.get_opt(name).await?.is_none() {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": arch(),
                    "node.kubernetes.io/instance-type": "sandbox",
                }
            },
            "spec": {}
        }))
        .map_err(kube::Error::SerdeError)?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    write_status(client, name, port, conditions).await
}

/// The node-declared feature under which kube-apiserver (1.36 and
/// later, `ExtendWebSocketsToKubelet`) sends exec, attach and
/// port-forward to the kubelet as WebSockets instead of SPDY.
pub const EXTEND_WEBSOCKETS_TO_KUBELET: &str = "ExtendWebSocketsToKubelet";

/// The architecture as Kubernetes names it.
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Writes the node's status; `port` is the kubelet endpoint's (`server`).
async fn write_status(
    client: &Client,
    name: &str,
    port: u16,
    conditions: &mut Transitions,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    if let Some(current) = nodes
        .get_opt(name)
        .await?
        .and_then(|n| n.status?.conditions)
    {
        conditions.seen(&current);
    }
    let (capacity, allocatable) = resources();
    let status = json!({"status": {
        "capacity": capacity,
        "allocatable": allocatable,
        // No Hostname address: kube-apiserver tries one first to reach a
        // kubelet, and the node's name resolves to nothing.
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        // kube-apiserver 1.36 proxies exec, attach and port-forward
        // WebSockets straight to a kubelet that declares it serves them
        // (the kubelet's endpoint speaks WebSocket only, not SPDY).
        "declaredFeatures": [EXTEND_WEBSOCKETS_TO_KUBELET],
        "conditions": conditions.report(&now()),
        "nodeInfo": {
            "architecture": arch(),
            "operatingSystem": "linux",
            "kubeletVersion": "v1.33.0-sandbox",
            "kubeProxyVersion": "v1.33.0-sandbox",
            "containerRuntimeVersion": "sandbox://processes",
            "osImage": "tusk sandbox",
            "kernelVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Renews the node's Lease, creating it when absent (and its namespace,
/// which a sandbox may not have yet).
async fn renew_lease(client: &Client, name: &str, period: Duration) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let renew = json!({"spec": {
        "holderIdentity": name,
        "leaseDurationSeconds": (period.as_secs() * 4).max(40),
        "renewTime": jiff::Timestamp::now().to_string(),
    }});
    if leases.get_opt(name).await?.is_some() {
        leases
            .patch(name, &PatchParams::default(), &Patch::Merge(&renew))
            .await?;
        return Ok(());
    }
    let mut lease = renew;
    lease["metadata"] = json!({"name": name, "namespace": LEASE_NAMESPACE});
    let lease: Lease = serde_json::from_value(lease).map_err(kube::Error::SerdeError)?;
    match leases.create(&PostParams::default(), &lease).await {
        Err(kube::Error::Api(e)) if e.code == 404 => {
            create_lease_namespace(client).await?;
            leases.create(&PostParams::default(), &lease).await?;
        }
        other => {
            other?;
        }
    }
    Ok(())
}

async fn create_lease_namespace(client: &Client) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": LEASE_NAMESPACE}}))
            .map_err(kube::Error::SerdeError)?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => other.map(drop),
    }
}

/// Registers the node, then renews its status and Lease every `period`.
pub async fn heartbeat(
    client: Client,
    name: String,
    data_dir: PathBuf,
    period: Duration,
    port: u16,
    node: NodeLoss,
) {
    let mut registered = false;
    let mut conditions = Transitions::new(&data_dir);
    loop {
        node.up().await;
        let result = if registered {
            write_status(&client, &name, port, &mut conditions).await
        } else {
            register(&client, &name, port, &mut conditions).await
        };
        match result {
            Ok(()) => registered = true,
            Err(error) => tracing::warn!(node = %name, %error, "cannot update the node"),
        }
        if let Err(error) = renew_lease(&client, &name, period).await {
            tracing::warn!(node = %name, %error, "cannot renew the node lease");
        }
        tokio::time::sleep(period).await;
    }
}
