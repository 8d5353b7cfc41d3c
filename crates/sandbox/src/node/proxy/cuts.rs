//! Partitions between a pod and the clients that reach it through a
//! Service: traffic the proxy carries to or from the pod is held back
//! (dropped, as far as either end can tell) until the cut heals.
//!
//! Only the Service path can be cut here. Pods share the host's network
//! namespace, so a connection a pod opens to another pod's address, or
//! one that reaches a pod at its own address, goes through the kernel's
//! loopback without passing the proxy; and since every connection a pod
//! opens leaves from 127.0.0.1, the proxy cannot tell which pod is the
//! client either. A cut therefore names the pod on the endpoint side.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

/// Which way traffic stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Clients' bytes no longer reach the pod.
    Ingress,
    /// The pod's bytes no longer reach its clients.
    Egress,
    /// Nothing passes either way.
    Both,
}

impl Direction {
    fn blocks(self, to_pod: bool) -> bool {
        match self {
            Self::Both => true,
            Self::Ingress => to_pod,
            Self::Egress => !to_pod,
        }
    }
}

impl std::str::FromStr for Direction {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "ingress" => Ok(Self::Ingress),
            "egress" => Ok(Self::Egress),
            "both" | "" => Ok(Self::Both),
            other => Err(format!(
                "direction {other:?} is not one of ingress, egress, both"
            )),
        }
    }
}

/// A pod as `(namespace, name)`.
pub type PodKey = (String, String);

/// The pods cut off from their Services' clients. Shared; clone freely.
#[derive(Clone, Debug)]
pub struct ServiceCuts {
    cuts: Arc<watch::Sender<BTreeMap<PodKey, Direction>>>,
}

impl Default for ServiceCuts {
    fn default() -> Self {
        Self {
            cuts: Arc::new(watch::channel(BTreeMap::new()).0),
        }
    }
}

impl ServiceCuts {
    /// Stops traffic through Services to (and/or from) the pod.
    pub fn cut(&self, namespace: &str, pod: &str, direction: Direction) {
        self.cuts.send_modify(|cuts| {
            cuts.insert((namespace.to_owned(), pod.to_owned()), direction);
        });
    }

    /// Lets traffic flow again; held bytes are delivered.
    pub fn heal(&self, namespace: &str, pod: &str) {
        self.cuts.send_modify(|cuts| {
            cuts.remove(&(namespace.to_owned(), pod.to_owned()));
        });
    }

    /// The cut of a pod, if any.
    pub fn of(&self, namespace: &str, pod: &str) -> Option<Direction> {
        self.cuts
            .borrow()
            .get(&(namespace.to_owned(), pod.to_owned()))
            .copied()
    }

    /// Waits until traffic may pass towards the pod (`to_pod`) or from it.
    pub(crate) async fn passable(&self, pod: Option<&PodKey>, to_pod: bool) {
        let Some(pod) = pod else { return };
        let mut changes = self.cuts.subscribe();
        let _ = changes
            .wait_for(|cuts| !cuts.get(pod).is_some_and(|d| d.blocks(to_pod)))
            .await;
    }

    /// Waits until a new connection to the pod can be set up: a handshake
    /// needs both ways.
    pub(crate) async fn connectable(&self, pod: Option<&PodKey>) {
        let Some(pod) = pod else { return };
        let mut changes = self.cuts.subscribe();
        let _ = changes.wait_for(|cuts| !cuts.contains_key(pod)).await;
    }
}
