//! One container's life: start its process, run its probes, restart it by
//! the restart policy with back-off, and stop it gracefully when asked.
//!
//! Each container is one task that owns its process; it reports every
//! change of state into its slot of the pod's [`PodState`], from which the
//! pod's status is computed.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::backoff::Backoff;
use super::faults::KubeletFaults;
use super::node_loss::NodeLoss;
use super::plan::ContainerPlan;
use super::probes::{ProbePlan, Verdict, run_check};
use super::process::Exit;
use super::runtime::{Launch, Running};
use super::status::{
    CONFIG_ERROR, ContainerReport, IMAGE_MISSING, PodState, State, Terminated, now,
};

/// When a stopped container starts again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    Always,
    OnFailure,
    Never,
}

impl Restart {
    pub fn from_policy(policy: Option<&str>) -> Self {
        match policy {
            Some("Never") => Self::Never,
            Some("OnFailure") => Self::OnFailure,
            _ => Self::Always,
        }
    }

    fn restarts(self, exit: &Exit, killed_by_probe: bool) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => !exit.success() || killed_by_probe,
            Self::Never => false,
        }
    }
}

/// Where a container reports: the pod state and its slot in it.
#[derive(Clone, Debug)]
pub struct Slot {
    pub state: Arc<Mutex<PodState>>,
    pub init: bool,
    pub index: usize,
}

impl Slot {
    fn update(&self, change: impl FnOnce(&mut ContainerReport)) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let list = if self.init {
            &mut state.init
        } else {
            &mut state.main
        };
        if let Some(report) = list.get_mut(self.index) {
            change(report);
        }
    }

    fn restart_count(&self) -> i32 {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let list = if self.init { &state.init } else { &state.main };
        list.get(self.index).map_or(0, |r| r.restart_count)
    }
}

/// Who the container belongs to, for fault injection.
#[derive(Clone, Debug)]
pub struct Owner {
    pub namespace: String,
    pub pod: String,
    pub faults: KubeletFaults,
}

/// Asks a running container to stop: `Some(grace)`.
pub type StopSignal = watch::Receiver<Option<Duration>>;

enum ProbeEvent {
    Started,
    Ready(bool),
    Failed(String),
}

/// What the container's last run ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exited and will not be restarted.
    Exited(Exit),
    /// Stopped because the pod is going away (or could never start).
    Stopped,
}

async fn stop_requested(stop: &mut StopSignal) -> Duration {
    loop {
        if let Some(grace) = *stop.borrow_and_update() {
            return grace;
        }
        if stop.changed().await.is_err() {
            return Duration::ZERO;
        }
    }
}

/// Runs the container until it ends for good or is stopped.
pub async fn run(
    plan: ContainerPlan,
    restart: Restart,
    backoff: Backoff,
    slot: Slot,
    owner: Owner,
    mut stop: StopSignal,
) -> Outcome {
    let mut crashes = 0u32;
    let mut delay = Duration::ZERO;
    loop {
        if !delay.is_zero() && !back_off(delay, &plan.name, &slot, &owner, &mut stop).await {
            return Outcome::Stopped;
        }
        let Some(mut spec) = next_launch(&plan, &slot, &owner, &mut stop).await else {
            return Outcome::Stopped;
        };
        let log = begin_run(&plan, &mut spec, &slot, &owner);
        let started_at = now();
        let run = start_and_wait(&spec, &plan, &slot, &owner, &mut stop, &started_at).await;
        let (exit, failure) = match run {
            RunEnd::NotCreated(reason, message) => {
                // As the kubelet does for an image it may not pull or a
                // configuration it cannot make: the container waits,
                // retried with back-off, and never ran.
                crashes = crashes.saturating_add(1);
                slot.update(|r| r.state = State::waiting(&reason, message));
                let retry = backoff.delay(crashes).max(Duration::from_secs(1));
                if wait_or_stop(retry, &mut stop).await {
                    return Outcome::Stopped;
                }
                delay = Duration::ZERO;
                continue;
            }
            RunEnd::Stopped(exit) => {
                let message = plan.termination.message(&exit, None, &log);
                record_exit(&slot, exit, message, &started_at, false);
                return Outcome::Stopped;
            }
            RunEnd::Ended { exit, failure, ran } => {
                // A program that cannot start backs off like one that crashes.
                crashes = ran.map_or(crashes.saturating_add(1), |ran| {
                    backoff.next_crashes(crashes, ran)
                });
                (exit, failure)
            }
        };
        let restarts = restart.restarts(&exit, failure.is_some());
        let message = plan.termination.message(&exit, failure, &log);
        record_exit(&slot, exit, message, &started_at, restarts);
        if !restarts {
            return Outcome::Exited(exit);
        }
        crashes = crashes.max(1);
        delay = backoff.delay(crashes);
    }
}

/// How to launch the container's next run, once the node is up; `None`
/// when a stop was asked for first or the container cannot run (it then
/// waits with its reason until stopped).
async fn next_launch(
    plan: &ContainerPlan,
    slot: &Slot,
    owner: &Owner,
    stop: &mut StopSignal,
) -> Option<Launch> {
    let spec = match &plan.process {
        Ok(spec) => spec.clone(),
        Err((reason, message)) => {
            slot.update(|r| r.state = State::waiting(reason, message.clone()));
            stop_requested(stop).await;
            return None;
        }
    };
    // A lost node starts nothing; killed containers restart once it is
    // back.
    tokio::select! {
        () = owner.faults.node_loss().up() => Some(spec),
        _ = stop_requested(stop) => None,
    }
}

/// Readies a run of the container: its log file (older runs' logs
/// pruned) and an empty termination message file. The log's path.
fn begin_run(plan: &ContainerPlan, spec: &mut Launch, slot: &Slot, owner: &Owner) -> PathBuf {
    let run = slot.restart_count();
    let log = super::logs::run_log(&plan.log_dir, run);
    spec.set_log(log.clone());
    super::logs::prune(&plan.log_dir, run);
    if let Err(error) = plan.termination.reset() {
        // As the kubelet, which starts the container without the file.
        tracing::warn!(
            pod = %owner.pod, container = %plan.name, %error,
            "cannot empty the termination message file"
        );
    }
    log
}

/// How one run of a container ended.
enum RunEnd {
    /// It was never created (an image it may not use, a configuration
    /// that cannot be made): the waiting reason and message.
    NotCreated(String, String),
    /// It was stopped because the pod is going away.
    Stopped(Exit),
    /// It ended by itself or by a failed probe, or its program could not
    /// start; the sandbox's own failure text, and how long it ran (`None`
    /// when it never started).
    Ended {
        exit: Exit,
        failure: Option<String>,
        ran: Option<Duration>,
    },
}

/// Starts one run of the container and supervises it to its end.
async fn start_and_wait(
    spec: &Launch,
    plan: &ContainerPlan,
    slot: &Slot,
    owner: &Owner,
    stop: &mut StopSignal,
    started_at: &str,
) -> RunEnd {
    match Running::start(spec).await {
        Err((reason, message)) if reason == IMAGE_MISSING || reason == CONFIG_ERROR => {
            RunEnd::NotCreated(reason, message)
        }
        Err((reason, message)) => {
            slot.update(|r| r.state = State::waiting(&reason, message.clone()));
            let exit = Exit {
                code: 128,
                signal: None,
                oom_killed: false,
            };
            RunEnd::Ended {
                exit,
                failure: Some(message),
                ran: None,
            }
        }
        Ok(process) => match supervise(process, plan, slot, owner, stop, started_at).await {
            Supervised::Stopped(exit) => RunEnd::Stopped(exit),
            Supervised::Exited(exit, failure, ran) => RunEnd::Ended {
                exit,
                failure,
                ran: Some(ran),
            },
        },
    }
}

/// Waits `delay`; true when a stop was asked for meanwhile.
async fn wait_or_stop(delay: Duration, stop: &mut StopSignal) -> bool {
    tokio::select! {
        () = tokio::time::sleep(delay) => false,
        _ = stop_requested(stop) => true,
    }
}

/// Shows CrashLoopBackOff and waits `delay` before a restart; false when
/// a stop was asked for meanwhile.
async fn back_off(
    delay: Duration,
    container: &str,
    slot: &Slot,
    owner: &Owner,
    stop: &mut StopSignal,
) -> bool {
    let message = format!(
        "back-off {}s restarting failed container={container} pod={}",
        delay.as_secs(),
        owner.pod
    );
    slot.update(|r| {
        r.state = State::waiting("CrashLoopBackOff", message);
        r.ready = false;
    });
    !wait_or_stop(delay, stop).await
}

enum Supervised {
    Stopped(Exit),
    Exited(Exit, Option<String>, Duration),
}

/// Records a run's end with its `message` (see
/// [`super::termination::TerminationMessage::message`]).
fn record_exit(
    slot: &Slot,
    exit: Exit,
    message: Option<String>,
    started_at: &str,
    restarting: bool,
) {
    let terminated = Terminated {
        exit_code: exit.code,
        signal: exit.signal,
        reason: if exit.oom_killed {
            "OOMKilled"
        } else if exit.success() {
            "Completed"
        } else {
            "Error"
        }
        .to_owned(),
        message,
        started_at: started_at.to_owned(),
        finished_at: now(),
    };
    slot.update(|r| {
        r.ready = false;
        r.pid = None;
        if restarting {
            r.last_state = Some(terminated);
            r.restart_count += 1;
            r.state = State::waiting("ContainerCreating", "");
        } else {
            r.state = State::Terminated(terminated);
        }
    });
}

async fn supervise(
    mut process: Running,
    plan: &ContainerPlan,
    slot: &Slot,
    owner: &Owner,
    stop: &mut StopSignal,
    started_at: &str,
) -> Supervised {
    let pid = process.pid();
    let record = plan.log_dir.join("pid");
    if process.recorded() {
        super::process::record(&record, pid);
    }
    owner
        .faults
        .register(&owner.namespace, &owner.pod, &plan.name, pid);
    slot.update(|r| {
        r.state = State::Running {
            started_at: started_at.to_owned(),
        };
        r.pid = Some(pid);
        r.started = plan.startup.is_none();
        r.ready = false;
    });
    let (events, mut probe_events) = mpsc::channel(16);
    let probes = AbortOnDrop(tokio::spawn(run_probes(
        owner.faults.node_loss().clone(),
        plan.startup.clone(),
        plan.liveness.clone(),
        plan.readiness.clone(),
        events,
    )));
    let result = loop {
        enum Next {
            Exited(Exit),
            Stop(Duration),
            Probe(ProbeEvent),
        }
        let next = tokio::select! {
            exit = process.wait() => Next::Exited(exit),
            grace = stop_requested(stop) => Next::Stop(grace),
            Some(event) = probe_events.recv() => Next::Probe(event),
        };
        match next {
            Next::Exited(exit) => break Supervised::Exited(exit, None, process.running_for()),
            Next::Stop(grace) => break Supervised::Stopped(process.stop(grace).await),
            Next::Probe(ProbeEvent::Started) => slot.update(|r| r.started = true),
            Next::Probe(ProbeEvent::Ready(ready)) => slot.update(|r| r.ready = ready),
            Next::Probe(ProbeEvent::Failed(message)) => {
                let exit = process.stop(plan.grace).await;
                break Supervised::Exited(exit, Some(message), process.running_for());
            }
        }
    };
    drop(probes);
    owner
        .faults
        .unregister(&owner.namespace, &owner.pod, &plan.name, pid);
    let _ = std::fs::remove_file(&record);
    result
}

/// A task that ends with its owner.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one probe until its verdict is `want` (or forever when `want` is
/// `None`), sending every change of verdict. Probes start every period, as
/// the kubelet's ticker starts them: a check that times out is followed at
/// once by the next, so a hung container fails `failureThreshold` checks in
/// about `failureThreshold` timeouts, not timeouts plus periods.
async fn probe_loop(
    plan: &ProbePlan,
    want: Option<bool>,
    node: &NodeLoss,
    mut changed: impl FnMut(bool, String),
) {
    tokio::time::sleep(plan.initial_delay).await;
    let mut verdict = Verdict::default();
    let mut ticker = tokio::time::interval(plan.period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        // A lost node probes nothing.
        node.up().await;
        let result = run_check(&plan.check, plan.timeout).await;
        let message = result.as_ref().err().cloned().unwrap_or_default();
        if verdict.record(result.is_ok(), plan)
            && let Some(passing) = verdict.passing
        {
            changed(passing, message);
            if want == Some(passing) {
                return;
            }
        }
    }
}

async fn run_probes(
    node: NodeLoss,
    startup: Option<ProbePlan>,
    liveness: Option<ProbePlan>,
    readiness: Option<ProbePlan>,
    events: mpsc::Sender<ProbeEvent>,
) {
    if let Some(plan) = &startup {
        let mut failed = None;
        probe_loop(plan, Some(true), &node, |passing, message| {
            if !passing && failed.is_none() {
                failed = Some(message);
            }
        })
        .await;
        // A startup probe that fails its threshold restarts the container.
        if let Some(message) = failed {
            let _ = events
                .send(ProbeEvent::Failed(format!(
                    "Startup probe failed: {message}"
                )))
                .await;
            return;
        }
        let _ = events.send(ProbeEvent::Started).await;
    }
    let readiness_events = events.clone();
    let readiness_node = node.clone();
    let readiness_task = async move {
        match &readiness {
            None => {
                let _ = readiness_events.send(ProbeEvent::Ready(true)).await;
            }
            Some(plan) => {
                let (sender, mut receiver) = mpsc::unbounded_channel();
                let forward = async {
                    while let Some(ready) = receiver.recv().await {
                        let _ = readiness_events.send(ProbeEvent::Ready(ready)).await;
                    }
                };
                let probing = probe_loop(plan, None, &readiness_node, move |passing, _| {
                    let _ = sender.send(passing);
                });
                tokio::join!(probing, forward);
            }
        }
    };
    let liveness_task = async move {
        if let Some(plan) = &liveness {
            let (sender, mut receiver) = mpsc::unbounded_channel();
            let probing = probe_loop(plan, Some(false), &node, move |passing, message| {
                if !passing {
                    let _ = sender.send(message);
                }
            });
            let forward = async {
                if let Some(message) = receiver.recv().await {
                    let _ = events
                        .send(ProbeEvent::Failed(format!(
                            "Liveness probe failed: {message}"
                        )))
                        .await;
                }
            };
            tokio::join!(probing, forward);
        }
    };
    tokio::join!(readiness_task, liveness_task);
}
