//! The Node this kubelet stands for, and the Lease that says it is alive.
//!
//! Controllers and `kubectl get nodes` read the Node's capacity and Ready
//! condition; the node lifecycle on Kubernetes reads the Lease in
//! `kube-node-lease`. The kubelet renews both on a heartbeat, so a stopped
//! sandbox shows as a stale node rather than a healthy one.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::node_loss::NodeLoss;
use super::status::now;

const LEASE_NAMESPACE: &str = "kube-node-lease";

fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map_or(0, |kib| kib * 1024)
}

fn capacity() -> serde_json::Value {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    json!({
        "cpu": cpus.to_string(),
        "memory": format!("{}Ki", memory_bytes() / 1024),
        "pods": "110",
        "ephemeral-storage": "100Gi",
    })
}

/// Creates the Node (when absent) and writes its status.
pub async fn register(client: &Client, name: &str, port: u16) -> Result<(), kube::Error> {
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
    write_status(client, name, port).await
}

/// Writes the node's status; `port` is the kubelet endpoint's (`server`).
async fn write_status(client: &Client, name: &str, port: u16) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let time = now();
    let capacity = capacity();
    let status = json!({"status": {
        "capacity": capacity,
        "allocatable": capacity,
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "the sandbox kubelet is posting ready status",
            "lastHeartbeatTime": time,
            "lastTransitionTime": time,
        }],
        "nodeInfo": {
            "architecture": std::env::consts::ARCH,
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

/// Renews the node's Lease (creating it and its namespace when absent).
pub async fn renew_lease(client: &Client, name: &str, period: Duration) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(LEASE_NAMESPACE).await?.is_none() {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": LEASE_NAMESPACE}}))
                .map_err(kube::Error::SerdeError)?;
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
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
    } else {
        let mut lease = renew;
        lease["metadata"] = json!({"name": name, "namespace": LEASE_NAMESPACE});
        let lease: Lease = serde_json::from_value(lease).map_err(kube::Error::SerdeError)?;
        leases.create(&PostParams::default(), &lease).await?;
    }
    Ok(())
}

/// Registers the node, then renews its status and Lease every `period`.
pub async fn heartbeat(client: Client, name: String, period: Duration, port: u16, node: NodeLoss) {
    let mut registered = false;
    loop {
        node.up().await;
        let result = if registered {
            write_status(&client, &name, port).await
        } else {
            register(&client, &name, port).await
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
