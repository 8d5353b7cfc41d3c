//! The sandbox kubelet: runs every pod's containers as local processes
//! or, with the Docker runtime (`docker`), as containers of the machine's
//! engine; `runtime` is the seam between the two and the shared logic.
//!
//! In the sandbox there is one node and no scheduler, so the kubelet takes
//! every pod that names no node (binding it to itself) or names this one;
//! on a control plane with a scheduler (`PodAssignment::Scheduler`) it
//! watches only the pods bound to it, as a kubelet does. Each pod gets a
//! worker task (`pod`) that owns its processes; the kubelet only routes
//! watch events to workers and keeps the node's heartbeat (`node`) and
//! local volumes (`claims`). Containers' output is kept in CRI log files
//! (`logs`); the kubelet's endpoint (`server`) serves them and exec
//! sessions to the API server for the pods workers register (`served`).
//! The contract a pod's programs see (images, volumes as translated paths,
//! one loopback address per pod, users, the ServiceAccount token at its
//! fixed path through a mount namespace of each container's own:
//! `identity`, `projected`, `isolation`) is described in `docs/sandbox.md`.

mod addresses;
mod api_access;
mod atomic_writer;
mod backoff;
mod claims;
mod container;
pub mod docker;
mod env;
mod exit;
mod faults;
mod files;
mod identity;
mod images;
mod input_error;
mod inputs;
mod isolation;
mod logs;
mod node;
mod node_loss;
mod peer_cuts;
mod plan;
mod pod;
mod probes;
mod process;
mod projected;
mod runtime;
mod served;
mod server;
mod status;
mod termination;
mod volumes;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

pub use identity::postgres_identity;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use backoff::Backoff;
pub use faults::{FaultError, KubeletFaults};
pub use images::{ImageError, ImageMapping, ImageRule, Runtime};
pub use node_loss::Processes;
pub use peer_cuts::PeerCutError;
pub use runtime::ContainerRuntime;

use addresses::AddressPool;

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("cannot prepare the kubelet directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the kubeconfig {path} for pods: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "pods run as their own users and cannot reach {data_dir}: {dir} is closed to other users; use a data directory they can reach (e.g. /var/lib/tusk/sandbox) or run chmod o+x {dir}"
    )]
    NotReachable { data_dir: PathBuf, dir: PathBuf },
    #[error("cannot listen for the API server on a loopback port: {source}")]
    Endpoint { source: std::io::Error },
    #[error("cannot serve the kubelet endpoint over HTTPS: {0}")]
    EndpointTls(#[from] server::tls::EndpointTlsError),
    #[error(transparent)]
    Images(#[from] ImageError),
    #[error(transparent)]
    Docker(#[from] docker::DockerError),
}

/// How the kubelet runs.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    pub node_name: String,
    /// Pods live under `<data_dir>/pods`, volumes under `<data_dir>/volumes`.
    pub data_dir: PathBuf,
    /// The executable that stands for the Tusk image.
    pub tusk_binary: PathBuf,
    pub images: ImageMapping,
    pub backoff: Backoff,
    /// The sandbox's admin kubeconfig. Pods never get it (they reach the
    /// API as their ServiceAccount); it is no longer read and will go with
    /// the next change of this configuration's callers.
    pub kubeconfig: String,
    /// How often a pod's status is recomputed (written only on change).
    pub status_interval: Duration,
    /// Node status and Lease renewal period.
    pub heartbeat: Duration,
    /// How often running pods' Secret and ConfigMap volumes are refreshed
    /// (the kubelet's sync period: a minute).
    pub volume_refresh: Duration,
    /// What runs pods' containers.
    pub runtime: ContainerRuntime,
    /// Who puts pods on this node.
    pub assignment: PodAssignment,
    /// The CA (PEM) whose client certificates the kubelet's endpoint lets
    /// in, over HTTPS (a kubelet's `--client-ca-file`); without it, plain
    /// HTTP with the API server's bearer token, as the sandbox's API
    /// server calls it.
    pub client_ca: Option<String>,
}

/// Who puts pods on the node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodAssignment {
    /// No scheduler runs (the sandbox): the kubelet binds every pod that
    /// names no node to itself.
    #[default]
    Kubelet,
    /// A scheduler binds pods (kube-scheduler): the kubelet watches only
    /// the pods whose `spec.nodeName` is its node, as a kubelet does.
    Scheduler,
}

impl KubeletConfig {
    /// Defaults for a sandbox in `data_dir`, with the image mapping read
    /// from (or first written to) `<data_dir>/images.yaml`.
    pub fn new(
        data_dir: &Path,
        kubeconfig: String,
        tusk_binary: PathBuf,
    ) -> Result<Self, KubeletError> {
        std::fs::create_dir_all(data_dir).map_err(|source| KubeletError::Dir {
            path: data_dir.to_owned(),
            source,
        })?;
        Ok(Self {
            node_name: "sandbox".into(),
            data_dir: data_dir.to_owned(),
            tusk_binary,
            images: ImageMapping::load_or_init(&data_dir.join("images.yaml"))?,
            backoff: Backoff::default(),
            kubeconfig,
            status_interval: Duration::from_millis(200),
            heartbeat: Duration::from_secs(10),
            volume_refresh: Duration::from_secs(60),
            runtime: ContainerRuntime::Process,
            assignment: PodAssignment::Kubelet,
            client_ca: None,
        })
    }
}

/// What every pod worker shares.
pub(crate) struct Context {
    client: Client,
    config: KubeletConfig,
    addresses: AddressPool,
    faults: KubeletFaults,
    /// Whether the sandbox runs as root (and so can run pods as their
    /// users).
    root: bool,
    /// The pods the kubelet's endpoint serves logs and exec for.
    served: served::ServedPods,
}

impl Context {
    fn pod_dir(&self, namespace: &str, name: &str, uid: &str) -> PathBuf {
        self.config
            .data_dir
            .join("pods")
            .join(format!("{namespace}_{name}_{uid}"))
    }

    /// Where a pod's own volumes live. Kept short and apart from the pod
    /// directory: PostgreSQL's Unix socket path, often in an emptyDir, must
    /// fit in 107 bytes.
    fn pod_volumes_dir(&self, uid: &str) -> PathBuf {
        self.config.data_dir.join("volumes").join(uid)
    }
}

/// A running kubelet. Dropping it aborts it; [`KubeletHandle::shutdown`]
/// stops every container gracefully first.
pub struct KubeletHandle {
    faults: KubeletFaults,
    stopping: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    heartbeat: JoinHandle<()>,
    claims: JoinHandle<()>,
    endpoint: JoinHandle<()>,
    /// The Docker runtime's relay from pods to the API server.
    api_forwarder: Option<JoinHandle<()>>,
    runtime: ContainerRuntime,
}

impl KubeletHandle {
    pub fn faults(&self) -> KubeletFaults {
        self.faults.clone()
    }

    /// Stops every container (SIGTERM, grace period, SIGKILL) and waits for
    /// them; pods stay in the API and come back on the next start.
    pub async fn shutdown(mut self) {
        let _ = self.stopping.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(runtime) = self.runtime.docker() {
            runtime.clean().await;
        }
    }
}

impl Drop for KubeletHandle {
    fn drop(&mut self) {
        self.heartbeat.abort();
        self.claims.abort();
        self.endpoint.abort();
        if let Some(forwarder) = &self.api_forwarder {
            forwarder.abort();
        }
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Makes the data directory traversable for pods' users when running as
/// root (their volumes live below it).
fn prepare_dirs(config: &KubeletConfig, root: bool) -> Result<(), KubeletError> {
    use std::os::unix::fs::PermissionsExt;
    for dir in [
        config.data_dir.clone(),
        config.data_dir.join("pods"),
        config.data_dir.join("volumes"),
    ] {
        let error = |source| KubeletError::Dir {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(error)?;
        if root {
            let mode = std::fs::metadata(&dir).map_err(error)?.permissions().mode();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode | 0o711))
                .map_err(error)?;
        }
    }
    if root {
        let data_dir = config
            .data_dir
            .canonicalize()
            .map_err(|source| KubeletError::Dir {
                path: config.data_dir.clone(),
                source,
            })?;
        for dir in data_dir.ancestors().skip(1) {
            let closed = std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 == 0);
            if closed {
                return Err(KubeletError::NotReachable {
                    data_dir: data_dir.clone(),
                    dir: dir.to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// Whether the sandbox runs as root (and so runs pods as their users).
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Starts the kubelet.
pub fn start(client: Client, config: KubeletConfig) -> Result<KubeletHandle, KubeletError> {
    start_with_provisioner(client.clone(), client, config)
}

/// Starts the kubelet, its volume provisioner with a client of its own:
/// a kubelet authenticated as its node (`system:node:<name>`) may not
/// create PersistentVolumes, which a provisioner does.
pub fn start_with_provisioner(
    client: Client,
    provisioner: Client,
    config: KubeletConfig,
) -> Result<KubeletHandle, KubeletError> {
    let root = running_as_root();
    prepare_dirs(&config, root)?;
    let faults = match config.runtime.docker() {
        None => KubeletFaults::default(),
        Some(runtime) => KubeletFaults::with_peer_network(peer_cuts::PeerNetwork {
            gateway: runtime.gateway(),
        }),
    };
    let (endpoint, port, served) = start_endpoint(&client, &config, &faults)?;
    let heartbeat = tokio::spawn(node::heartbeat(
        client.clone(),
        config.node_name.clone(),
        config.data_dir.clone(),
        config.heartbeat,
        port,
        faults.node_loss().clone(),
    ));
    let claims = tokio::spawn(claims::run(provisioner, config.data_dir.clone()));
    let seed = config.data_dir.to_string_lossy().into_owned();
    let (addresses, api_forwarder) = match config.runtime.docker() {
        None => (AddressPool::seeded(&seed), None),
        Some(runtime) => {
            let (first, last) = runtime.address_range();
            let api = api_access::api_address(&config.kubeconfig);
            let forwarder = docker::forward_api(runtime, api)?;
            (AddressPool::seeded_in(&seed, first, last), Some(forwarder))
        }
    };
    let runtime = config.runtime.clone();
    let ctx = Arc::new(Context {
        client,
        config,
        addresses,
        faults: faults.clone(),
        root,
        served,
    });
    let (stopping, stop_signal) = watch::channel(false);
    let task = tokio::spawn(watch_pods(ctx, stop_signal));
    Ok(KubeletHandle {
        faults,
        stopping,
        task: Some(task),
        heartbeat,
        claims,
        endpoint,
        api_forwarder,
        runtime,
    })
}

/// Starts the endpoint the API server proxies `pods/log` and `pods/exec`
/// to (see `server`); its port goes into the Node's status.
fn start_endpoint(
    client: &Client,
    config: &KubeletConfig,
    faults: &KubeletFaults,
) -> Result<(JoinHandle<()>, u16, served::ServedPods), KubeletError> {
    let error = |source| KubeletError::Endpoint { source };
    let listener = server::bind().map_err(error)?;
    let port = listener.local_addr().map_err(error)?.port();
    let served = served::ServedPods::default();
    let auth = match &config.client_ca {
        Some(ca) => server::EndpointAuth::ClientCertificate {
            tls: server::tls::server_config(ca)?,
            authorizer: server::authorize::Authorizer::new(
                client.clone(),
                config.node_name.clone(),
            ),
        },
        None => server::EndpointAuth::BearerToken(api_access::api_token(&config.kubeconfig)),
    };
    let state = Arc::new(server::ServerState {
        pods: served.clone(),
        faults: faults.clone(),
        auth,
    });
    Ok((tokio::spawn(server::serve(listener, state)), port, served))
}

/// Whether `text` has the shape of a Kubernetes uid (a UUID).
fn is_uid(text: &str) -> bool {
    text.len() == 36
        && text.chars().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Removes the pod directories and pod volumes of pods that were deleted
/// while the sandbox was down (claims' directories, `pvc-...`, are never
/// touched here).
fn remove_leftovers(data_dir: &Path, live: &BTreeSet<String>) {
    let entries = |dir: PathBuf| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| (e.path(), e.file_name().to_string_lossy().into_owned()))
    };
    let pod_dirs = entries(data_dir.join("pods")).filter_map(|(path, name)| {
        let uid = name.rsplit('_').next()?.to_owned();
        (is_uid(&uid) && name.contains('_')).then_some((path, uid))
    });
    let volume_dirs = entries(data_dir.join("volumes")).filter(|(_, name)| is_uid(name));
    for (path, uid) in pod_dirs.chain(volume_dirs) {
        if !live.contains(&uid)
            && let Err(error) = std::fs::remove_dir_all(&path)
        {
            tracing::warn!(path = %path.display(), %error, "cannot remove a deleted pod's files");
        }
    }
}

struct Worker {
    uid: String,
    signals: mpsc::UnboundedSender<pod::Signal>,
    task: JoinHandle<()>,
}

impl Drop for Worker {
    /// A worker owns its pod's processes: aborting it kills them.
    fn drop(&mut self) {
        self.task.abort();
    }
}

type PodKey = (String, String);

async fn bind(ctx: &Context, pod: &Pod) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let patch = Patch::Merge(json!({"spec": {"nodeName": ctx.config.node_name}}));
    if let Err(error) = api
        .patch(&pod.name_any(), &PatchParams::default(), &patch)
        .await
    {
        tracing::warn!(pod = %pod.name_any(), %error, "cannot bind pod to the sandbox node");
    }
}

fn route(ctx: &Arc<Context>, workers: &mut BTreeMap<PodKey, Worker>, pod: Pod) {
    let key = (pod.namespace().unwrap_or_default(), pod.name_any());
    let uid = pod.uid().unwrap_or_default();
    if let Some(worker) = workers.get(&key) {
        if worker.uid == uid && !worker.task.is_finished() {
            let _ = worker.signals.send(pod::Signal::Seen(Box::new(pod)));
            return;
        }
        if worker.uid != uid {
            // A new pod with the name of an old one: the old one is gone.
            let _ = worker.signals.send(pod::Signal::Gone);
        }
        if !worker.task.is_finished() {
            // Wait for the old worker to finish before starting anew; the
            // next event or resync routes the pod again.
            return;
        }
    }
    let (signals, receiver) = mpsc::unbounded_channel();
    let task = tokio::spawn(pod::run(ctx.clone(), pod, receiver));
    workers.insert(key, Worker { uid, signals, task });
}

async fn watch_pods(ctx: Arc<Context>, mut stopping: watch::Receiver<bool>) {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let selection = match ctx.config.assignment {
        PodAssignment::Kubelet => watcher::Config::default(),
        PodAssignment::Scheduler => {
            watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.config.node_name))
        }
    };
    let mut events = std::pin::pin!(watcher(api, selection).default_backoff());
    let mut pods = PodWatch::default();
    let mut resync = tokio::time::interval(Duration::from_secs(2));
    let node = ctx.faults.node_loss().clone();
    loop {
        if node.lost() {
            // A lost node hears nothing; what changed meanwhile arrives
            // when it is back (the watch resumes or lists again).
            tokio::select! {
                () = node.up() => {}
                _ = stopping.changed() => break,
            }
        }
        let event = tokio::select! {
            event = events.next() => event,
            () = node.down() => continue,
            _ = stopping.changed() => break,
            _ = resync.tick() => {
                pods.resync(&ctx);
                continue;
            }
        };
        let Some(event) = event else { break };
        match event {
            Ok(watcher::Event::Init) => pods.listed = Some(Vec::new()),
            Ok(watcher::Event::InitApply(pod) | watcher::Event::Apply(pod)) => {
                pods.applied(&ctx, pod).await;
            }
            Ok(watcher::Event::Delete(pod)) => pods.deleted(&pod),
            Ok(watcher::Event::InitDone) => pods.listing_done(&ctx),
            Err(error) => tracing::debug!(%error, "pod watch interrupted; resuming"),
        }
    }
    for worker in pods.workers.values() {
        let _ = worker.signals.send(pod::Signal::NodeStopping);
    }
    for worker in pods.workers.values_mut() {
        let _ = (&mut worker.task).await;
    }
}

/// The kubelet's view of the pods: every pod of this node it has seen,
/// the worker running each, and the pods of a listing in progress.
#[derive(Default)]
struct PodWatch {
    workers: BTreeMap<PodKey, Worker>,
    listed: Option<Vec<PodKey>>,
    known: BTreeMap<PodKey, Pod>,
}

impl PodWatch {
    /// Starts workers for pods whose previous worker was still finishing.
    fn resync(&mut self, ctx: &Arc<Context>) {
        for pod in self.known.values() {
            let key = (pod.namespace().unwrap_or_default(), pod.name_any());
            if self.workers.get(&key).is_none_or(|w| w.task.is_finished()) {
                route(ctx, &mut self.workers, pod.clone());
            }
        }
        let known = &self.known;
        self.workers
            .retain(|key, w| !w.task.is_finished() || known.contains_key(key));
    }

    /// A pod created or changed: bound to this node if unscheduled, then
    /// handed to its worker. Pods of other nodes are ignored.
    async fn applied(&mut self, ctx: &Arc<Context>, pod: Pod) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if !node.is_empty() && node != ctx.config.node_name {
            return;
        }
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.known.insert(key.clone(), pod.clone());
        let previous_ip = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
        if let Some(ip) = previous_ip.and_then(|ip| ip.parse().ok()) {
            ctx.addresses.reserve(&pod.uid().unwrap_or_default(), ip);
        }
        if let Some(listed) = &mut self.listed {
            listed.push(key);
        }
        if node.is_empty() {
            bind(ctx, &pod).await;
        } else {
            route(ctx, &mut self.workers, pod);
        }
    }

    fn deleted(&mut self, pod: &Pod) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.known.remove(&key);
        if let Some(worker) = self.workers.get(&key)
            && Some(&worker.uid) == pod.uid().as_ref()
        {
            let _ = worker.signals.send(pod::Signal::Gone);
        }
    }

    /// After a (re)listing: pods that were not listed are gone, and so are
    /// the directories of pods that no longer exist.
    fn listing_done(&mut self, ctx: &Context) {
        let Some(listed) = self.listed.take() else {
            return;
        };
        for (key, worker) in &self.workers {
            if !listed.contains(key) {
                self.known.remove(key);
                let _ = worker.signals.send(pod::Signal::Gone);
            }
        }
        let uids: BTreeSet<String> = self.known.values().filter_map(|p| p.uid()).collect();
        remove_leftovers(&ctx.config.data_dir, &uids);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_files_of_pods_that_are_gone_are_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let live = "0b7c3a4e-1111-4222-8333-444455556666";
        let gone = "9f00aa11-2222-4333-8444-555566667777";
        let paths = [
            format!("pods/default_web_{live}"),
            format!("pods/default_old_{gone}"),
            format!("volumes/{live}/scratch"),
            format!("volumes/{gone}/scratch"),
            format!("volumes/pvc-{gone}"),
        ];
        for path in &paths {
            std::fs::create_dir_all(dir.path().join(path)).expect("mkdir");
        }
        remove_leftovers(dir.path(), &BTreeSet::from([live.to_owned()]));
        let exists: Vec<bool> = paths.iter().map(|p| dir.path().join(p).exists()).collect();
        assert_eq!(
            exists,
            vec![true, false, true, false, true],
            "claims are never removed"
        );
    }

    #[test]
    fn a_data_directory_closed_to_pod_users_is_refused() {
        let parent = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        let config = KubeletConfig::new(&parent.path().join("data"), String::new(), "tusk".into())
            .expect("config");
        let error = prepare_dirs(&config, true).expect_err("closed parent");
        let closed = parent.path().canonicalize().expect("canonical");
        assert!(
            matches!(&error, KubeletError::NotReachable { dir, .. } if *dir == closed),
            "{error}"
        );
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o711))
            .expect("chmod");
        prepare_dirs(&config, true).expect("reachable now");
        let mode = std::fs::metadata(parent.path().join("data/volumes"))
            .expect("volumes dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o011, 0o011, "pod users can traverse into volumes");
    }
}
