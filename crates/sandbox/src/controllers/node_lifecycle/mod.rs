//! The node lifecycle controller, as kube-controller-manager runs it: it
//! watches every node's reports (the Ready condition's heartbeat and the
//! Lease in `kube-node-lease`) and, when a node has been silent for longer
//! than the grace period (`--node-monitor-grace-period`, 40 s by default),
//! turns its conditions `Unknown`; it taints nodes by their Ready
//! condition (`node.kubernetes.io/unreachable` or `not-ready`, NoSchedule
//! and NoExecute), marks the pods of a node that is not ready not ready,
//! and evicts pods from NoExecute-tainted nodes once their tolerations
//! run out (the taint eviction controller's part). `health` and
//! `eviction` decide; this module reads and writes.

pub mod eviction;
pub mod health;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use eviction::Eviction;

/// How the controller watches nodes.
#[derive(Clone, Copy, Debug)]
pub struct NodeLifecycleConfig {
    /// How long a node may be silent before it is `Unknown`
    /// (`--node-monitor-grace-period`).
    pub grace_period: Duration,
    /// How often nodes are checked (`--node-monitor-period`).
    pub monitor_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        Self {
            grace_period: Duration::from_secs(40),
            monitor_period: Duration::from_secs(5),
        }
    }
}

impl NodeLifecycleConfig {
    /// The same, checking often enough for a short grace period (a
    /// quarter of it, at least every 100 ms) to be honoured.
    pub fn monitored_within_grace(self) -> Self {
        let quarter = (self.grace_period / 4).max(Duration::from_millis(100));
        Self {
            monitor_period: self.monitor_period.min(quarter),
            ..self
        }
    }
}

/// Runs until the task is dropped.
pub async fn run(client: Client, config: NodeLifecycleConfig) {
    let mut ticker = tokio::time::interval(config.monitor_period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let since = Timestamp::now();
    loop {
        ticker.tick().await;
        if let Err(error) = pass(&client, config.grace_period, since).await {
            tracing::debug!(%error, "node lifecycle pass interrupted; retrying");
        }
    }
}

async fn pass(client: &Client, grace: Duration, since: Timestamp) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    for node in nodes.list(&ListParams::default()).await? {
        let lease = leases.get_opt(&node.name_any()).await?;
        let node = monitor(&nodes, node, lease.as_ref(), (grace, since)).await?;
        handle_pods(client, &node).await?;
    }
    Ok(())
}

/// Marks a silent node's conditions Unknown and sets its taints.
async fn monitor(
    nodes: &Api<Node>,
    mut node: Node,
    lease: Option<&Lease>,
    (grace, since): (Duration, Timestamp),
) -> Result<Node, kube::Error> {
    let now = Timestamp::now();
    let name = node.name_any();
    if health::gone_silent(&node, lease, grace, now, since) {
        tracing::info!(node = %name, "node stopped reporting; its conditions are now Unknown");
        let patch = json!({
            "metadata": {"resourceVersion": node.resource_version()},
            "status": {"conditions": health::silent_conditions(&node, now)},
        });
        node = nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let wanted = health::wanted_taints(&node, now);
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if wanted != current {
        let patch = json!({
            "metadata": {"resourceVersion": node.resource_version()},
            "spec": {"taints": wanted},
        });
        node = nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(node)
}

/// Marks the pods of a node that is not ready not ready, and evicts those
/// whose tolerations of its NoExecute taints ran out.
async fn handle_pods(client: &Client, node: &Node) -> Result<(), kube::Error> {
    let ready = health::ready(node) == Some("True");
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if ready && taints.iter().all(|t| t.effect != "NoExecute") {
        return Ok(());
    }
    let all: Api<Pod> = Api::all(client.clone());
    let on_node = ListParams::default().fields(&format!("spec.nodeName={}", node.name_any()));
    let now = Timestamp::now();
    for pod in all.list(&on_node).await? {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.clone())
            .unwrap_or_default();
        match eviction::eviction(&tolerations, &taints, now) {
            Eviction::At(at) if at <= now => evict(&pods, &pod, now).await?,
            _ if !ready => mark_not_ready(&pods, &pod, now).await?,
            _ => {}
        }
    }
    Ok(())
}

fn conditions(pod: &Pod) -> Vec<PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

async fn write_conditions(
    pods: &Api<Pod>,
    pod: &Pod,
    conditions: Vec<PodCondition>,
) -> Result<(), kube::Error> {
    let patch = json!({
        "metadata": {"resourceVersion": pod.resource_version()},
        "status": {"conditions": conditions},
    });
    pods.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// The pod's Ready condition turned False (reason and message kept), as
/// the node lifecycle controller's MarkPodsNotReady does.
async fn mark_not_ready(pods: &Api<Pod>, pod: &Pod, now: Timestamp) -> Result<(), kube::Error> {
    let mut conditions = conditions(pod);
    let Some(ready) = conditions
        .iter_mut()
        .find(|c| c.type_ == "Ready" && c.status != "False")
    else {
        return Ok(());
    };
    ready.status = "False".into();
    ready.last_transition_time = Some(Time(now));
    tracing::info!(pod = %pod.name_any(), "marking the pod of a node that is not ready not ready");
    write_conditions(pods, pod, conditions).await
}

/// Records why the pod goes (the DisruptionTarget condition), then
/// deletes it with its grace period; its node's kubelet finishes the
/// deletion when it is back.
async fn evict(pods: &Api<Pod>, pod: &Pod, now: Timestamp) -> Result<(), kube::Error> {
    let mut conditions = conditions(pod);
    conditions.retain(|c| c.type_ != "DisruptionTarget");
    conditions.push(PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("DeletionByTaintManager".into()),
        message: Some("Taint manager: deleting due to NoExecute taint".into()),
        last_transition_time: Some(Time(now)),
        ..PodCondition::default()
    });
    tracing::info!(pod = %pod.name_any(), "evicting the pod of a NoExecute-tainted node");
    write_conditions(pods, pod, conditions).await?;
    match pods.delete(&pod.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}
