//! Injecting faults into a running sandbox over HTTP (`POST
//! /sandbox/faults/{fault}`, served by the API server's `fault_control`),
//! for `tusk sandbox fault` and for tests that reach the sandbox only
//! through its kubeconfig.

use kube::Client;

use crate::node::kubelet::Processes;
use crate::node::proxy::cuts::Direction;

/// A pod, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

/// One fault to start or end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Requests with the pod's bound token go unanswered.
    CutApi(PodRef),
    HealApi(PodRef),
    /// Traffic through Services to or from the pod is held back.
    CutService(PodRef, Direction),
    HealService(PodRef),
    /// Packets between the pod and the other pods are dropped (Docker
    /// runtime only; the host still reaches the pod).
    CutPeers(PodRef, Direction),
    HealPeers(PodRef),
    /// SIGSTOP, SIGCONT or SIGKILL to a container's processes (the pod's
    /// first container when `None`).
    Freeze(PodRef, Option<String>),
    Thaw(PodRef, Option<String>),
    Kill(PodRef, Option<String>),
    /// The node stops reporting and acting; see
    /// [`crate::kubelet::KubeletFaults::lose_node`].
    LoseNode {
        node: String,
        processes: Processes,
    },
    RestoreNode {
        node: String,
    },
}

fn pod_query(pod: &PodRef) -> Vec<(&'static str, String)> {
    vec![
        ("namespace", pod.namespace.clone()),
        ("pod", pod.name.clone()),
    ]
}

fn direction_query(pod: &PodRef, direction: Direction) -> Vec<(&'static str, String)> {
    let mut query = pod_query(pod);
    let direction = serde_json::to_value(direction).unwrap_or_default();
    query.push(("direction", direction.as_str().unwrap_or("both").to_owned()));
    query
}

fn container_query(pod: &PodRef, container: Option<&String>) -> Vec<(&'static str, String)> {
    let mut query = pod_query(pod);
    if let Some(container) = container {
        query.push(("container", container.clone()));
    }
    query
}

impl Fault {
    /// The fault's name in the path, and its parameters.
    fn request(&self) -> (&'static str, Vec<(&'static str, String)>) {
        match self {
            Self::CutApi(pod) => ("cut-api", pod_query(pod)),
            Self::HealApi(pod) => ("heal-api", pod_query(pod)),
            Self::CutService(pod, direction) => ("cut-service", direction_query(pod, *direction)),
            Self::HealService(pod) => ("heal-service", pod_query(pod)),
            Self::CutPeers(pod, direction) => ("cut-peers", direction_query(pod, *direction)),
            Self::HealPeers(pod) => ("heal-peers", pod_query(pod)),
            Self::Freeze(pod, container) => ("freeze", container_query(pod, container.as_ref())),
            Self::Thaw(pod, container) => ("thaw", container_query(pod, container.as_ref())),
            Self::Kill(pod, container) => ("kill", container_query(pod, container.as_ref())),
            Self::LoseNode { node, processes } => {
                let processes = serde_json::to_value(processes).unwrap_or_default();
                let processes = processes.as_str().unwrap_or("keep").to_owned();
                (
                    "lose-node",
                    vec![("node", node.clone()), ("processes", processes)],
                )
            }
            Self::RestoreNode { node } => ("restore-node", vec![("node", node.clone())]),
        }
    }
}

/// Starts or ends `fault`; the sandbox's answer (a Status message) on
/// success.
pub async fn inject(client: &Client, fault: &Fault) -> Result<String, kube::Error> {
    let (name, query) = fault.request();
    let query: Vec<String> = query
        .iter()
        .map(|(key, value)| format!("{key}={}", escape(value)))
        .collect();
    let uri = format!("/sandbox/faults/{name}?{}", query.join("&"));
    let request = axum::http::Request::post(uri)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let answer = client.request_text(request).await?;
    let message = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned));
    Ok(message.unwrap_or(answer))
}

/// Percent-encodes all but the characters a query value may hold as they
/// are.
pub(crate) fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}
