//! One pod's life on the node: prepare (address, volumes, environment,
//! programs), run the init containers in order, then the containers, keep
//! the status current, and on deletion stop everything gracefully and
//! remove the pod.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Context;
use super::container::{self, Outcome, Restart, Slot};
use super::files::FileOwner;
use super::identity::{TokenFile, keep_fresh};
use super::input_error::InputError;
use super::inputs::PodInputs;
use super::plan::ContainerPlan;
use super::plan::{PodFacts, plan_container};
use super::served::ServedPod;
use super::status::{ContainerReport, PodState, State, Transitions, now, pod_status};
use super::volumes::{VolumeError, materialise};

#[derive(Debug, thiserror::Error)]
pub enum PodError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error(transparent)]
    Docker(#[from] super::docker::DockerError),
    #[error("cannot prepare the pod directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What the kubelet tells a pod's worker.
#[derive(Clone, Debug)]
pub enum Signal {
    /// The pod as last seen (deletion shows as `deletionTimestamp`).
    Seen(Box<Pod>),
    /// The pod is gone from the API.
    Gone,
    /// The node is shutting down: stop the containers, keep the pod.
    NodeStopping,
}

fn dir_error(path: &Path) -> impl FnOnce(std::io::Error) -> PodError {
    let path = path.to_owned();
    move |source| PodError::Dir { path, source }
}

/// Who owns the pod's own volumes: its user, with fsGroup as group.
fn volume_owner(pod: &Pod, root: bool) -> Option<FileOwner> {
    if !root {
        return None;
    }
    let context = pod.spec.as_ref()?.security_context.as_ref()?;
    let uid = u32::try_from(context.run_as_user.filter(|u| *u != 0)?).ok()?;
    let gid = match context.fs_group.or(context.run_as_group) {
        Some(g) => u32::try_from(g).ok()?,
        None => uid,
    };
    Some(FileOwner { uid, gid })
}

struct Prepared {
    init: Vec<ContainerPlan>,
    main: Vec<ContainerPlan>,
    /// Token files to replace before they expire, and their owner.
    tokens: Vec<TokenFile>,
    owner: Option<FileOwner>,
}

/// The token files of the pod's projected volumes.
fn token_files(pod: &Pod, volumes_dir: &Path, inputs: &PodInputs) -> Vec<TokenFile> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let mut files = Vec::new();
    for volume in volumes {
        let Some(projected) = &volume.projected else {
            continue;
        };
        let mode = projected.default_mode.map_or(0o644, |m| m as u32);
        let sources = projected.sources.iter().flatten();
        for projection in sources.filter_map(|s| s.service_account_token.as_ref()) {
            let key = (volume.name.clone(), projection.path.clone());
            if let Some(token) = inputs.tokens.get(&key) {
                files.push(TokenFile {
                    path: volumes_dir.join(&volume.name).join(&projection.path),
                    projection: projection.clone(),
                    mode,
                    token: token.clone(),
                });
            }
        }
    }
    files
}

async fn prepare(
    ctx: &Context,
    pod: &Pod,
    pod_dir: &Path,
    pod_ip: Ipv4Addr,
) -> Result<Prepared, PodError> {
    let owner = volume_owner(pod, ctx.root);
    std::fs::create_dir_all(pod_dir.join("logs")).map_err(dir_error(pod_dir))?;
    // Processes a killed sandbox left running would hold the pod's ports.
    for entry in std::fs::read_dir(pod_dir.join("logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        super::process::kill_recorded(&entry.path().join("pid")).await;
    }
    if let Some(owner) = owner {
        std::os::unix::fs::chown(pod_dir, Some(owner.uid), Some(owner.gid))
            .map_err(dir_error(pod_dir))?;
    }
    let data_dir = ctx.config.data_dir.clone();
    let inputs = PodInputs::fetch(&ctx.client, pod, |volume| {
        super::claims::volume_dir(&data_dir, volume)
    })
    .await?;
    let volumes_dir = ctx.pod_volumes_dir(&pod.uid().unwrap_or_default());
    let volume_dirs = materialise(pod, &volumes_dir, &inputs, owner)?;
    if let Some(owner) = owner {
        for claim in inputs.claims.values() {
            std::os::unix::fs::chown(claim, Some(owner.uid), Some(owner.gid))
                .map_err(dir_error(claim))?;
        }
    }
    if let Some(runtime) = ctx.config.runtime.docker() {
        let uid = pod.uid().unwrap_or_default();
        runtime.start_pause(&uid, &pod.name_any(), pod_ip).await?;
    }
    let spec = pod.spec.clone().unwrap_or_default();
    let grace =
        Duration::from_secs(spec.termination_grace_period_seconds.unwrap_or(30).max(0) as u64);
    let facts = PodFacts {
        ctx,
        pod,
        inputs: &inputs,
        volume_dirs: &volume_dirs,
        pod_dir,
        pod_ip,
        grace,
    };
    let plan = |c: &Container| match ctx.config.runtime.docker() {
        Some(runtime) => super::docker::plan::plan_container(runtime, facts, c),
        None => plan_container(facts, c),
    };
    Ok(Prepared {
        init: spec.init_containers.iter().flatten().map(plan).collect(),
        main: spec.containers.iter().map(plan).collect(),
        tokens: token_files(pod, &volumes_dir, &inputs),
        owner,
    })
}

/// Every `volume_refresh`, reads the pod's Secrets and ConfigMaps again
/// and rewrites the volumes whose source changed (see
/// [`super::volumes::refresh`]). A failed read keeps the volumes as they
/// are until the next period.
async fn keep_volumes_fresh(ctx: Arc<Context>, pod: Pod, owner: Option<FileOwner>) {
    let volumes_dir = ctx.pod_volumes_dir(&pod.uid().unwrap_or_default());
    loop {
        tokio::time::sleep(ctx.config.volume_refresh).await;
        let refreshed = match PodInputs::fetch_data(&ctx.client, &pod).await {
            Ok(inputs) => super::volumes::refresh(&pod, &volumes_dir, &inputs, owner)
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.to_string()),
        };
        match refreshed {
            Ok(changed) if !changed.is_empty() => {
                tracing::info!(pod = %pod.name_any(), volumes = ?changed, "volumes refreshed");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(pod = %pod.name_any(), %error, "cannot refresh volumes");
            }
        }
    }
}

/// Lets `pods/exec` run commands the way the pod's containers run.
fn serve_exec(ctx: &Context, pod: &Pod, prepared: &Prepared) {
    let exec = prepared
        .init
        .iter()
        .chain(&prepared.main)
        .filter_map(|plan| Some((plan.name.clone(), plan.exec.clone()?)))
        .collect();
    let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let uid = pod.uid().unwrap_or_default();
    ctx.served.set_exec(&namespace, &name, &uid, exec);
}

/// Runs the containers until they end for good or `stop` asks.
async fn lifecycle(
    ctx: Arc<Context>,
    pod: Pod,
    pod_dir: PathBuf,
    pod_ip: Ipv4Addr,
    state: Arc<Mutex<PodState>>,
    mut stop: container::StopSignal,
) {
    let Some(prepared) = prepare_until_ready(&ctx, &pod, &pod_dir, pod_ip, &state, &mut stop).await
    else {
        return;
    };
    // Aborted with the lifecycle: tokens and volumes are refreshed while
    // the pod runs.
    let _tokens = container::AbortOnDrop(tokio::spawn(keep_fresh(
        ctx.client.clone(),
        pod.clone(),
        prepared.tokens,
        prepared.owner,
    )));
    let _volumes = container::AbortOnDrop(tokio::spawn(keep_volumes_fresh(
        ctx.clone(),
        pod.clone(),
        prepared.owner,
    )));
    let owner = container::Owner {
        namespace: pod.namespace().unwrap_or_default(),
        pod: pod.name_any(),
        faults: ctx.faults.clone(),
    };
    let policy = Restart::from_policy(pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()));
    let init_policy = if policy == Restart::Never {
        Restart::Never
    } else {
        Restart::OnFailure
    };
    let init = run_init_containers(&ctx, prepared.init, init_policy, &state, &owner, &stop);
    if !init.await {
        return;
    }
    {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        s.initialized = true;
        for report in &mut s.main {
            report.state = State::waiting("ContainerCreating", "");
        }
    }
    let runs = prepared.main.into_iter().enumerate().map(|(index, plan)| {
        let slot = Slot {
            state: state.clone(),
            init: false,
            index,
        };
        container::run(
            plan,
            policy,
            ctx.config.backoff,
            slot,
            owner.clone(),
            stop.clone(),
        )
    });
    let outcomes = futures::future::join_all(runs).await;
    if outcomes.iter().all(|o| matches!(o, Outcome::Exited(_))) {
        state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .finished = true;
    }
}

/// Runs the init containers one after another; false when one failed for
/// good (the pod is finished) or the pod is stopping.
async fn run_init_containers(
    ctx: &Context,
    plans: Vec<ContainerPlan>,
    policy: Restart,
    state: &Arc<Mutex<PodState>>,
    owner: &container::Owner,
    stop: &container::StopSignal,
) -> bool {
    for (index, plan) in plans.into_iter().enumerate() {
        let slot = Slot {
            state: state.clone(),
            init: true,
            index,
        };
        let backoff = ctx.config.backoff;
        match container::run(plan, policy, backoff, slot, owner.clone(), stop.clone()).await {
            Outcome::Exited(exit) if exit.success() => {}
            Outcome::Exited(_) => {
                state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .finished = true;
                return false;
            }
            Outcome::Stopped => return false,
        }
    }
    true
}

/// The status of a pod's Ready condition, from the API's pod or from a
/// status the kubelet wrote.
fn ready_status(status: Option<&Value>) -> Option<String> {
    status?["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?["status"]
        .as_str()
        .map(str::to_owned)
}

fn api_ready(pod: &Pod) -> Option<String> {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok());
    ready_status(status.as_ref())
}

/// Writes the pod's status whenever it changes, until `done`; and again
/// when the API's Ready condition (`seen`) differs from what was written,
/// as the kubelet's status manager reconciles a status another writer (the
/// node lifecycle controller) changed.
async fn publish(
    ctx: Arc<Context>,
    pod: Pod,
    state: Arc<Mutex<PodState>>,
    mut done: watch::Receiver<bool>,
    mut seen: watch::Receiver<Option<String>>,
) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let (name, uid) = (pod.name_any(), pod.uid().unwrap_or_default());
    let namespace = pod.namespace().unwrap_or_default();
    let mut transitions = Transitions::default();
    let mut written: Option<Value> = None;
    let node = ctx.faults.node_loss().clone();
    loop {
        if node.lost() {
            // Nothing is reported while the node is lost; once back, the
            // status is written again whatever was last written, since the
            // node lifecycle controller may have changed it meanwhile.
            written = None;
            tokio::select! {
                () = node.up() => {}
                _ = done.changed() => return,
            }
        }
        let changed_elsewhere = seen.borrow_and_update().as_ref().is_some_and(|ready| {
            written.is_some() && ready_status(written.as_ref()).as_ref() != Some(ready)
        });
        if changed_elsewhere {
            written = None;
        }
        let finishing = *done.borrow();
        let status = {
            let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
            s.readiness_failed = ctx.faults.readiness_failed(&namespace, &name);
            pod_status(&s, &uid, &mut transitions)
        };
        if written.as_ref() != Some(&status) {
            let patch = Patch::Merge(json!({"status": status}));
            match api
                .patch_status(&name, &PatchParams::default(), &patch)
                .await
            {
                Ok(_) => written = Some(status),
                Err(kube::Error::Api(e)) if e.code == 404 => return,
                Err(error) => {
                    tracing::warn!(pod = %name, %error, "cannot write pod status; retrying")
                }
            }
        }
        if finishing {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(ctx.config.status_interval) => {}
            _ = done.changed() => {}
            _ = seen.changed() => {}
        }
    }
}

fn initial_state(pod: &Pod, pod_ip: Ipv4Addr) -> PodState {
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let previous = |name: &str| {
        status
            .container_statuses
            .iter()
            .flatten()
            .find(|s| s.name == name)
            .map_or(0, |s| s.restart_count)
    };
    let report = |c: &Container, count: i32| {
        ContainerReport::new(&c.name, c.image.as_deref().unwrap_or(""), count)
    };
    PodState {
        pod_ip: Some(pod_ip.to_string()),
        start_time: Some(status.start_time.map_or_else(now, |t| t.0.to_string())),
        init: spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| report(c, 0))
            .collect(),
        main: spec
            .containers
            .iter()
            .map(|c| report(c, previous(&c.name)))
            .collect(),
        ..PodState::default()
    }
}

fn grace_of(pod: &Pod) -> Duration {
    let seconds = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref()?.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(seconds.max(0) as u64)
}

/// The address a pod had (kept across restarts of the sandbox).
fn previous_ip(pod: &Pod) -> Option<Ipv4Addr> {
    let ip = pod.status.as_ref()?.pod_ip.as_deref()?;
    ip.parse().ok()
}

/// The pod worker: runs until the pod is deleted or the node stops.
pub async fn run(
    ctx: Arc<Context>,
    first: Pod,
    mut signals: tokio::sync::mpsc::UnboundedReceiver<Signal>,
) {
    let namespace = first.namespace().unwrap_or_default();
    let name = first.name_any();
    let uid = first.uid().unwrap_or_default();
    let pod_ip = match ctx.addresses.allocate(&uid, previous_ip(&first)) {
        Ok(ip) => ip,
        Err(error) => {
            tracing::error!(pod = %name, %error, "cannot run pod");
            return;
        }
    };
    let pod_dir = ctx.pod_dir(&namespace, &name, &uid);
    let mut pod = first;
    pod.status.get_or_insert_with(Default::default).pod_ip = Some(pod_ip.to_string());
    let state = Arc::new(Mutex::new(initial_state(&pod, pod_ip)));
    let served = ServedPod::new(&uid, &pod_dir, &state);
    ctx.served.register(&namespace, &name, served);
    let (done, done_signal) = watch::channel(false);
    let (seen_ready, seen_signal) = watch::channel(None);
    let mut publisher = container::AbortOnDrop(tokio::spawn(publish(
        ctx.clone(),
        pod.clone(),
        state.clone(),
        done_signal,
        seen_signal,
    )));
    let (stop, stop_signal) = watch::channel(None);
    let mut running = std::pin::pin!(lifecycle(
        ctx.clone(),
        pod.clone(),
        pod_dir.clone(),
        pod_ip,
        state.clone(),
        stop_signal
    ));
    let mut finished = false;
    let mut grace = grace_of(&pod);
    let ending = loop {
        if pod.metadata.deletion_timestamp.is_some() {
            break Signal::Seen(Box::new(pod.clone()));
        }
        tokio::select! {
            () = &mut running, if !finished => finished = true,
            signal = signals.recv() => match signal {
                Some(Signal::Seen(seen)) => {
                    grace = grace_of(&seen);
                    seen_ready.send_replace(api_ready(&seen));
                    pod = *seen;
                }
                Some(Signal::Gone) | None => break Signal::Gone,
                Some(Signal::NodeStopping) => break Signal::NodeStopping,
            },
        }
    };
    if !finished {
        let _ = stop.send(Some(grace));
        running.await;
    }
    let _ = done.send(true);
    let _ = (&mut publisher.0).await;
    ctx.served.unregister(&namespace, &name, &uid);
    remove_containers(&ctx, &uid).await;
    if matches!(ending, Signal::NodeStopping) {
        return;
    }
    if matches!(ending, Signal::Seen(_)) {
        remove_from_api(&ctx, &namespace, &name, &uid).await;
    }
    for dir in [&pod_dir, &ctx.pod_volumes_dir(&uid)] {
        if let Err(error) = std::fs::remove_dir_all(dir) {
            tracing::debug!(pod = %name, %error, "cannot remove {}", dir.display());
        }
    }
    ctx.addresses.release(pod_ip);
}

/// Removes what the Docker runtime still holds of the pod (its pause
/// container); processes are gone once their containers stopped.
async fn remove_containers(ctx: &Context, uid: &str) {
    if let Some(runtime) = ctx.config.runtime.docker() {
        runtime.remove_pod(uid).await;
    }
}

/// Prepares the pod, retrying every second while an input is missing (a
/// claim not yet bound, a Secret not yet created) and showing why in the
/// containers' waiting state; `None` when the pod is stopped first.
async fn prepare_until_ready(
    ctx: &Context,
    pod: &Pod,
    pod_dir: &Path,
    pod_ip: Ipv4Addr,
    state: &Mutex<PodState>,
    stop: &mut container::StopSignal,
) -> Option<Prepared> {
    let set_all_waiting = |reason: &str, message: &str| {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        let list = if s.initialized {
            &mut s.main
        } else {
            &mut s.init
        };
        let list = if list.is_empty() { &mut s.main } else { list };
        for report in list.iter_mut() {
            report.state = State::waiting(reason, message);
        }
    };
    loop {
        match prepare(ctx, pod, pod_dir, pod_ip).await {
            Ok(prepared) => {
                serve_exec(ctx, pod, &prepared);
                return Some(prepared);
            }
            Err(error) => {
                let reason = match error {
                    PodError::Input(InputError::ClaimNotBound(_)) => "ContainerCreating",
                    PodError::Docker(super::docker::DockerError::MissingImage(_)) => {
                        super::status::IMAGE_MISSING
                    }
                    _ => super::status::CONFIG_ERROR,
                };
                set_all_waiting(reason, &error.to_string());
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.changed() => return None,
                }
            }
        }
    }
}

/// The kubelet's final delete of a pod whose containers have stopped
/// (grace period 0, for this pod's uid only).
async fn remove_from_api(ctx: &Context, namespace: &str, name: &str, uid: &str) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(error) => tracing::warn!(pod = %name, %error, "cannot remove the terminated pod"),
    }
}
