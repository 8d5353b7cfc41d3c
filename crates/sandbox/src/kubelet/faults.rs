//! Fault injection for tests: kill a container's processes, freeze and thaw
//! them, or make a pod's readiness fail, as a node problem would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::sys::signal::Signal;

use super::process::signal_group;

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
        // Programs may start children in sessions of their own (PostgreSQL
        // does, for every backend): the container is the whole tree, as a
        // cgroup is on a real node.
        for descendant in descendants(pid) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(descendant), signal);
        }
        signal_group(pid, signal);
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

/// Every process descending from `root`, from `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // Field 4, after the parenthesised command name.
            let ppid = stat
                .rfind(')')
                .and_then(|end| stat[end + 1..].split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parents.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        index += 1;
    }
    found.remove(0);
    found
}
