//! Fault injection for tests: kill a container's processes, freeze and thaw
//! them, or make a pod's readiness fail, as a node problem would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::sys::signal::Signal;

use super::process::signal_tree;

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("container {container:?} of pod {namespace}/{pod} is not running")]
    NotRunning {
        namespace: String,
        pod: String,
        container: String,
    },
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
}

impl KubeletFaults {
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

    fn signal(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        signal: Signal,
    ) -> Result<(), FaultError> {
        let pid = self
            .pid(namespace, pod, container)
            .ok_or_else(|| FaultError::NotRunning {
                namespace: namespace.into(),
                pod: pod.into(),
                container: container.into(),
            })?;
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

    pub(crate) fn readiness_failed(&self, namespace: &str, pod: &str) -> bool {
        self.state()
            .unready
            .contains(&(namespace.to_owned(), pod.to_owned()))
    }
}
