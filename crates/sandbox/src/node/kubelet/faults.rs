//! Fault injection for tests: kill a container's processes, freeze and thaw
//! them, make a pod's readiness fail, as a node problem would; lose the
//! whole node (`node_loss`); cut pods off from their Services' clients
//! (the proxy's [`ServiceCuts`], shared from here so one handle reaches
//! every fault of the node) and, on the Docker runtime, from their peers
//! (`peer_cuts`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::sys::signal::Signal;

use super::node_loss::{NodeLoss, Processes};
use super::peer_cuts::{self, PeerCutError, PeerNetwork};
use super::process::{signal_chosen, signal_tree};
use crate::node::proxy::cuts::{Direction, ServiceCuts};

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("container {container:?} of pod {namespace}/{pod} is not running")]
    NotRunning {
        namespace: String,
        pod: String,
        container: String,
    },
    #[error("pod {namespace}/{pod} has no running container")]
    NoContainer { namespace: String, pod: String },
    #[error(transparent)]
    Peers(#[from] PeerCutError),
}

type ContainerKey = (String, String, String);

#[derive(Debug, Default)]
struct State {
    pids: BTreeMap<ContainerKey, i32>,
    unready: BTreeSet<(String, String)>,
}

/// Shared handle; clone it freely.
#[derive(Clone, Debug, Default)]
pub struct KubeletFaults {
    state: Arc<Mutex<State>>,
    node: NodeLoss,
    cuts: ServiceCuts,
    /// The pod network peers are cut off on; `None` on the process
    /// runtime, which cannot cut them.
    peers: Option<PeerNetwork>,
}

impl KubeletFaults {
    /// The faults of a node whose pods have network namespaces of their
    /// own on `network` (the Docker runtime), so peers can be cut.
    pub(crate) fn with_peer_network(network: PeerNetwork) -> Self {
        Self {
            peers: Some(network),
            ..Self::default()
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn register(&self, namespace: &str, pod: &str, container: &str, pid: i32) {
        self.state()
            .pids
            .insert((namespace.into(), pod.into(), container.into()), pid);
    }

    pub(crate) fn unregister(&self, namespace: &str, pod: &str, container: &str, pid: i32) {
        let key = (namespace.to_owned(), pod.to_owned(), container.to_owned());
        let mut state = self.state();
        if state.pids.get(&key) == Some(&pid) {
            state.pids.remove(&key);
        }
    }

    /// The process id of a running container's main process.
    pub fn pid(&self, namespace: &str, pod: &str, container: &str) -> Option<i32> {
        let key = (namespace.to_owned(), pod.to_owned(), container.to_owned());
        self.state().pids.get(&key).copied()
    }

    fn running(&self, namespace: &str, pod: &str, container: &str) -> Result<i32, FaultError> {
        self.pid(namespace, pod, container)
            .ok_or_else(|| FaultError::NotRunning {
                namespace: namespace.into(),
                pod: pod.into(),
                container: container.into(),
            })
    }

    fn signal(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        signal: Signal,
    ) -> Result<(), FaultError> {
        let pid = self.running(namespace, pod, container)?;
        signal_tree(pid, signal);
        Ok(())
    }

    /// SIGKILL to every process of the container, as an OOM kill or crash.
    pub fn kill(&self, namespace: &str, pod: &str, container: &str) -> Result<(), FaultError> {
        self.signal(namespace, pod, container, Signal::SIGKILL)
    }

    /// SIGSTOP: the container stays "running" but answers nothing.
    pub fn freeze(&self, namespace: &str, pod: &str, container: &str) -> Result<(), FaultError> {
        self.signal(namespace, pod, container, Signal::SIGSTOP)
    }

    /// SIGSTOP to the container's processes whose command line (arguments
    /// joined by spaces) `chosen` picks; the others run on, e.g. a hung
    /// postmaster and instance manager while PostgreSQL's backends keep
    /// serving their established connections. Returns how many were
    /// frozen; [`KubeletFaults::thaw`] continues them.
    pub fn freeze_where(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        chosen: impl Fn(&str) -> bool,
    ) -> Result<usize, FaultError> {
        let pid = self.running(namespace, pod, container)?;
        Ok(signal_chosen(pid, Signal::SIGSTOP, chosen))
    }

    /// SIGCONT after [`KubeletFaults::freeze`].
    pub fn thaw(&self, namespace: &str, pod: &str, container: &str) -> Result<(), FaultError> {
        self.signal(namespace, pod, container, Signal::SIGCONT)
    }

    /// Forces the pod's Ready condition to False (or lets probes decide
    /// again when `failing` is false).
    pub fn fail_readiness(&self, namespace: &str, pod: &str, failing: bool) {
        let key = (namespace.to_owned(), pod.to_owned());
        let mut state = self.state();
        if failing {
            state.unready.insert(key);
        } else {
            state.unready.remove(&key);
        }
    }

    /// A process id of one of the pod's running containers (all of them
    /// share its network namespace).
    fn pod_process(&self, namespace: &str, pod: &str) -> Result<i32, FaultError> {
        self.state()
            .pids
            .iter()
            .find(|((ns, name, _), _)| ns == namespace && name == pod)
            .map(|(_, pid)| *pid)
            .ok_or_else(|| FaultError::NoContainer {
                namespace: namespace.into(),
                pod: pod.into(),
            })
    }

    /// Packets between the pod and the other pods stop in `direction`
    /// (established connections included), while the host still reaches
    /// it; see `peer_cuts`. Only the Docker runtime can do it.
    pub fn cut_peers(
        &self,
        namespace: &str,
        pod: &str,
        direction: Direction,
    ) -> Result<(), FaultError> {
        let network = self.peers.ok_or(PeerCutError::Unsupported)?;
        let pid = self.pod_process(namespace, pod)?;
        Ok(peer_cuts::cut(network, pid, direction)?)
    }

    /// Ends [`KubeletFaults::cut_peers`].
    pub fn heal_peers(&self, namespace: &str, pod: &str) -> Result<(), FaultError> {
        self.peers.ok_or(PeerCutError::Unsupported)?;
        peer_cuts::heal(self.pod_process(namespace, pod)?);
        Ok(())
    }

    /// The partitions between pods and their Services' clients.
    pub fn service_cuts(&self) -> ServiceCuts {
        self.cuts.clone()
    }

    /// The node stops reporting, as when it loses power or its network:
    /// no Node status or Lease renewals, no pod status, no reaction to
    /// changes in the API, no restarts. `processes` says what happens to
    /// the containers' processes meanwhile.
    pub fn lose_node(&self, processes: Processes) {
        if !self.node.lose(processes) {
            return;
        }
        match processes {
            Processes::Keep => {}
            Processes::Freeze => self.signal_all(Signal::SIGSTOP),
            Processes::Kill => self.signal_all(Signal::SIGKILL),
        }
    }

    /// The node is back: frozen processes continue, killed containers
    /// restart, and the kubelet reports and follows the API again.
    pub fn restore_node(&self) {
        if self.node.restore() == Some(Processes::Freeze) {
            self.signal_all(Signal::SIGCONT);
        }
    }

    /// Whether the node is lost.
    pub fn node_lost(&self) -> bool {
        self.node.lost()
    }

    pub(crate) fn node_loss(&self) -> &NodeLoss {
        &self.node
    }

    fn signal_all(&self, signal: Signal) {
        let pids: Vec<i32> = self.state().pids.values().copied().collect();
        for pid in pids {
            signal_tree(pid, signal);
        }
    }

    pub(crate) fn readiness_failed(&self, namespace: &str, pod: &str) -> bool {
        self.state()
            .unready
            .contains(&(namespace.to_owned(), pod.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_runtime_refuses_to_cut_peers_and_says_why() {
        let faults = KubeletFaults::default();
        faults.register("default", "db-1", "postgres", 4242);
        let error = faults
            .cut_peers("default", "db-1", Direction::Both)
            .expect_err("pods share one network namespace");
        assert!(error.to_string().contains("--runtime docker"), "{error}");
        let error = faults.heal_peers("default", "db-1").expect_err("nor heal");
        assert!(matches!(
            error,
            FaultError::Peers(PeerCutError::Unsupported)
        ));
    }

    #[test]
    fn a_peer_cut_needs_a_running_container_of_the_pod() {
        let faults = KubeletFaults::with_peer_network(PeerNetwork {
            gateway: std::net::Ipv4Addr::new(10, 130, 7, 1),
        });
        faults.register("default", "db-1", "postgres", 4242);
        let error = faults
            .cut_peers("default", "db-2", Direction::Both)
            .expect_err("db-2 runs nothing");
        assert_eq!(
            error.to_string(),
            "pod default/db-2 has no running container"
        );
    }
}
