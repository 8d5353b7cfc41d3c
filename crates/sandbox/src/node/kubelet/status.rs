//! What the kubelet observes about a pod, and how it is written to
//! `status`: phase, conditions, pod IP and one status per container.
//!
//! Containers report into [`PodState`]; the pod's status is computed from
//! it alone, so the same observations always give the same status and an
//! unchanged pod causes no write.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The waiting reason of a container whose image is not on the machine
/// (Kubernetes' for `imagePullPolicy: Never`): the sandbox never pulls.
pub const IMAGE_MISSING: &str = "ErrImageNeverPull";

/// The waiting reason of a container whose configuration cannot be made
/// (e.g. `runAsNonRoot` with an image that runs as root).
pub const CONFIG_ERROR: &str = "CreateContainerConfigError";

/// RFC 3339 time in whole seconds, as Kubernetes writes it.
pub fn now() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Terminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: String,
    pub message: Option<String>,
    pub started_at: String,
    pub finished_at: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Waiting { reason: String, message: String },
    Running { started_at: String },
    Terminated(Terminated),
}

impl State {
    pub fn waiting(reason: &str, message: impl Into<String>) -> Self {
        Self::Waiting {
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// One container as the kubelet sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerReport {
    pub name: String,
    pub image: String,
    pub state: State,
    pub last_state: Option<Terminated>,
    pub restart_count: i32,
    pub ready: bool,
    pub started: bool,
    pub pid: Option<i32>,
}

impl ContainerReport {
    pub fn new(name: &str, image: &str, restart_count: i32) -> Self {
        Self {
            name: name.to_owned(),
            image: image.to_owned(),
            state: State::waiting("PodInitializing", ""),
            last_state: None,
            restart_count,
            ready: false,
            started: false,
            pid: None,
        }
    }

    fn is_running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    fn terminated(&self) -> Option<&Terminated> {
        match &self.state {
            State::Terminated(t) => Some(t),
            _ => None,
        }
    }
}

fn terminated_json(t: &Terminated) -> Value {
    let mut value = json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": t.started_at,
        "finishedAt": t.finished_at,
    });
    if let Some(signal) = t.signal {
        value["signal"] = json!(signal);
    }
    if let Some(message) = &t.message {
        value["message"] = json!(message);
    }
    value
}

fn report_json(report: &ContainerReport, pod_uid: &str) -> Value {
    let state = match &report.state {
        State::Waiting { reason, message } if message.is_empty() => {
            json!({"waiting": {"reason": reason}})
        }
        State::Waiting { reason, message } => {
            json!({"waiting": {"reason": reason, "message": message}})
        }
        State::Running { started_at } => json!({"running": {"startedAt": started_at}}),
        State::Terminated(t) => json!({"terminated": terminated_json(t)}),
    };
    let mut value = json!({
        "name": report.name,
        "image": report.image,
        "imageID": format!("sandbox://{}", report.image),
        "state": state,
        "lastState": report.last_state.as_ref().map_or(json!({}), |t| json!({"terminated": terminated_json(t)})),
        "restartCount": report.restart_count,
        "ready": report.ready,
        "started": report.started,
    });
    if let Some(pid) = report.pid {
        value["containerID"] = json!(format!("sandbox://{pod_uid}/{}/{pid}", report.name));
    }
    value
}

/// The phase the pod is in, with the reason for a terminal one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// Everything the status is computed from.
#[derive(Clone, Debug, Default)]
pub struct PodState {
    pub pod_ip: Option<String>,
    pub start_time: Option<String>,
    pub init: Vec<ContainerReport>,
    pub main: Vec<ContainerReport>,
    pub initialized: bool,
    /// Set when every main container has stopped for good.
    pub finished: bool,
    /// Readiness forced false by fault injection.
    pub readiness_failed: bool,
}

impl PodState {
    pub fn phase(&self) -> Phase {
        if self
            .init
            .iter()
            .any(|r| r.terminated().is_some_and(|t| t.exit_code != 0))
            && self.finished
        {
            return Phase::Failed;
        }
        if !self.initialized {
            return Phase::Pending;
        }
        if self.finished {
            let all_ok = self
                .main
                .iter()
                .all(|r| r.terminated().is_some_and(|t| t.exit_code == 0));
            return if all_ok {
                Phase::Succeeded
            } else {
                Phase::Failed
            };
        }
        let started_once = self
            .main
            .iter()
            .all(|r| r.is_running() || r.terminated().is_some() || r.last_state.is_some());
        if started_once && !self.main.is_empty() {
            Phase::Running
        } else {
            Phase::Pending
        }
    }

    pub fn containers_ready(&self) -> bool {
        self.initialized && !self.main.is_empty() && self.main.iter().all(|r| r.ready)
    }

    pub fn ready(&self) -> bool {
        self.containers_ready() && !self.readiness_failed && !self.finished
    }
}

/// Keeps each condition's `lastTransitionTime` until its status changes.
#[derive(Debug, Default)]
pub struct Transitions(BTreeMap<String, (bool, String)>);

impl Transitions {
    fn condition(&mut self, type_: &str, status: bool, reason: Option<&str>) -> Value {
        let entry = self
            .0
            .entry(type_.to_owned())
            .or_insert_with(|| (status, now()));
        if entry.0 != status {
            *entry = (status, now());
        }
        let mut value = json!({
            "type": type_,
            "status": if status { "True" } else { "False" },
            "lastTransitionTime": entry.1,
            "lastProbeTime": null,
        });
        if let Some(reason) = reason.filter(|_| !status) {
            value["reason"] = json!(reason);
        }
        value
    }
}

/// The pod's `status`, computed from what the kubelet observed.
pub fn pod_status(state: &PodState, pod_uid: &str, transitions: &mut Transitions) -> Value {
    let phase = state.phase();
    let not_ready_reason = if phase == Phase::Succeeded || phase == Phase::Failed {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };
    let conditions = vec![
        transitions.condition("PodScheduled", true, None),
        transitions.condition(
            "Initialized",
            state.initialized,
            Some("ContainersNotInitialized"),
        ),
        transitions.condition(
            "ContainersReady",
            state.containers_ready(),
            Some(not_ready_reason),
        ),
        transitions.condition(
            "Ready",
            state.ready(),
            Some(if state.readiness_failed {
                "ReadinessFailed"
            } else {
                not_ready_reason
            }),
        ),
    ];
    let mut status = json!({
        "phase": phase.as_str(),
        "conditions": conditions,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "containerStatuses": state.main.iter().map(|r| report_json(r, pod_uid)).collect::<Vec<_>>(),
    });
    if !state.init.is_empty() {
        status["initContainerStatuses"] = json!(
            state
                .init
                .iter()
                .map(|r| report_json(r, pod_uid))
                .collect::<Vec<_>>()
        );
    }
    if let Some(ip) = &state.pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    if let Some(start) = &state.start_time {
        status["startTime"] = json!(start);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(name: &str, ready: bool) -> ContainerReport {
        ContainerReport {
            state: State::Running { started_at: now() },
            ready,
            started: true,
            ..ContainerReport::new(name, "img", 0)
        }
    }

    fn condition<'a>(status: &'a Value, type_: &str) -> &'a str {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("missing")
    }

    #[test]
    fn a_pod_is_ready_only_when_every_container_is() {
        let mut state = PodState {
            initialized: true,
            main: vec![running("a", true), running("b", false)],
            ..PodState::default()
        };
        let mut transitions = Transitions::default();
        let status = pod_status(&state, "uid", &mut transitions);
        assert_eq!(status["phase"], "Running");
        assert_eq!(condition(&status, "Ready"), "False");
        state.main[1].ready = true;
        let status = pod_status(&state, "uid", &mut transitions);
        assert_eq!(condition(&status, "Ready"), "True");
        state.readiness_failed = true;
        let status = pod_status(&state, "uid", &mut transitions);
        assert_eq!(condition(&status, "Ready"), "False");
        assert_eq!(condition(&status, "ContainersReady"), "True");
    }

    #[test]
    fn finished_containers_decide_success_or_failure() {
        let done = |code| ContainerReport {
            state: State::Terminated(Terminated {
                exit_code: code,
                signal: None,
                reason: "Completed".into(),
                message: None,
                started_at: now(),
                finished_at: now(),
            }),
            ..ContainerReport::new("job", "img", 0)
        };
        let mut state = PodState {
            initialized: true,
            finished: true,
            main: vec![done(0)],
            ..PodState::default()
        };
        assert_eq!(state.phase(), Phase::Succeeded);
        state.main = vec![done(2)];
        assert_eq!(state.phase(), Phase::Failed);
        state.initialized = false;
        state.main = vec![ContainerReport::new("job", "img", 0)];
        assert_eq!(state.phase(), Phase::Pending);
    }
}
