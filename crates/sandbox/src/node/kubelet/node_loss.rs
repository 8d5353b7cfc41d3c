//! The node's own failure: while it is lost the kubelet neither reports
//! (Node status, Lease, pod status) nor acts (pod changes, restarts,
//! probes), so the control plane sees what it sees when a machine dies or
//! drops off the network, and its node lifecycle controller takes over.
//! Each part of the kubelet waits on [`NodeLoss::up`] before it reports or
//! acts.

use std::sync::Arc;

use tokio::sync::watch;

/// What happens to the node's processes while it is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Processes {
    /// They run on, unsupervised (a network partition).
    Keep,
    /// SIGSTOP (a hung machine); SIGCONT when the node returns.
    Freeze,
    /// SIGKILL (a power loss); restarted when the node returns.
    Kill,
}

impl std::str::FromStr for Processes {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "keep" => Ok(Self::Keep),
            "freeze" => Ok(Self::Freeze),
            "kill" => Ok(Self::Kill),
            other => Err(format!(
                "processes {other:?} is not one of keep, freeze, kill"
            )),
        }
    }
}

/// Whether the node is lost, and how; shared by the kubelet's tasks.
#[derive(Clone, Debug)]
pub struct NodeLoss {
    state: Arc<watch::Sender<Option<Processes>>>,
}

impl Default for NodeLoss {
    fn default() -> Self {
        Self {
            state: Arc::new(watch::channel(None).0),
        }
    }
}

impl NodeLoss {
    /// Marks the node lost; false when it already was.
    pub fn lose(&self, processes: Processes) -> bool {
        self.state.send_if_modified(|state| {
            let changed = state.is_none();
            if changed {
                *state = Some(processes);
            }
            changed
        })
    }

    /// Marks the node back; how it was lost, if it was.
    pub fn restore(&self) -> Option<Processes> {
        let mut was = None;
        self.state.send_if_modified(|state| {
            was = state.take();
            was.is_some()
        });
        was
    }

    pub fn lost(&self) -> bool {
        self.state.borrow().is_some()
    }

    /// Resolves once the node is (or is again) up.
    pub async fn up(&self) {
        let mut changes = self.state.subscribe();
        let _ = changes.wait_for(Option::is_none).await;
    }

    /// Resolves once the node is lost.
    pub async fn down(&self) {
        let mut changes = self.state.subscribe();
        let _ = changes.wait_for(Option::is_some).await;
    }
}
