//! Pods (or whole nodes) cut off from the API server, as a network
//! partition cuts them off: their requests are not answered while the cut
//! lasts (the client sees nothing, as when packets are dropped, until its
//! own timeout), and the answers of their open watches are held back.
//! Healing lets waiting requests through, as TCP delivers resent packets
//! once a partition heals.
//!
//! Requests are told apart by credential, not by address: every pod
//! reaches the API server from 127.0.0.1 (through the `kubernetes`
//! Service or directly), but a pod's ServiceAccount token is bound to the
//! pod and names it in its claims. Requests with other credentials (the
//! admin's, the kubelet's, a token not bound to a pod) are never cut.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Body;
use futures::StreamExt;
use tokio::sync::watch;

/// A pod as `(namespace, name)`.
pub type PodKey = (String, String);

#[derive(Debug, Default)]
struct Cuts {
    pods: BTreeSet<PodKey>,
    nodes: BTreeSet<String>,
}

impl Cuts {
    fn cut(&self, pod: &PodKey, node: Option<&str>) -> bool {
        self.pods.contains(pod) || node.is_some_and(|n| self.nodes.contains(n))
    }
}

/// Shared handle; clone it freely.
#[derive(Clone, Debug)]
pub struct Partitions {
    cuts: Arc<watch::Sender<Cuts>>,
}

impl Default for Partitions {
    fn default() -> Self {
        Self {
            cuts: Arc::new(watch::channel(Cuts::default()).0),
        }
    }
}

fn key(namespace: &str, pod: &str) -> PodKey {
    (namespace.to_owned(), pod.to_owned())
}

impl Partitions {
    /// Cuts the pod off: requests with its bound token go unanswered.
    pub fn cut_pod(&self, namespace: &str, pod: &str) {
        self.cuts.send_modify(|c| {
            c.pods.insert(key(namespace, pod));
        });
    }

    pub fn heal_pod(&self, namespace: &str, pod: &str) {
        self.cuts.send_modify(|c| {
            c.pods.remove(&key(namespace, pod));
        });
    }

    /// Cuts off every pod bound to the node (`spec.nodeName`).
    pub fn cut_node(&self, node: &str) {
        self.cuts.send_modify(|c| {
            c.nodes.insert(node.to_owned());
        });
    }

    pub fn heal_node(&self, node: &str) {
        self.cuts.send_modify(|c| {
            c.nodes.remove(node);
        });
    }

    /// Whether a node's pods are cut off.
    pub fn node_cut(&self, node: &str) -> bool {
        self.cuts.borrow().nodes.contains(node)
    }

    /// Whether anything is cut off (so requests need a closer look).
    pub(crate) fn any(&self) -> bool {
        let cuts = self.cuts.borrow();
        !cuts.pods.is_empty() || !cuts.nodes.is_empty()
    }

    /// Resolves once the pod (on `node`) may reach the API server.
    pub(crate) async fn reachable(&self, pod: &PodKey, node: Option<&str>) {
        let mut changes = self.cuts.subscribe();
        let _ = changes.wait_for(|c| !c.cut(pod, node)).await;
    }

    /// The body of a streamed answer (a watch) to the pod: each part waits
    /// until the pod is reachable.
    pub(crate) fn hold_while_cut(&self, body: Body, pod: PodKey, node: Option<String>) -> Body {
        let partitions = self.clone();
        let parts = body.into_data_stream().then(move |part| {
            let (partitions, pod, node) = (partitions.clone(), pod.clone(), node.clone());
            async move {
                partitions.reachable(&pod, node.as_deref()).await;
                part
            }
        });
        Body::from_stream(parts)
    }
}
