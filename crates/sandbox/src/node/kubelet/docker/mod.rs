//! The Docker runtime: pods as containers of the machine's Docker engine.
//!
//! A pod is a "pause" container (the base image running `sleep infinity`)
//! that holds the pod's network namespace and its address on the sandbox's
//! own bridge network, and one container per Kubernetes container joined to
//! that namespace (`--network container:<pause>`), so the containers of a
//! pod share `localhost` and the pod IP as on Kubernetes. Volumes are the
//! same host directories the process runtime uses (`volumes`), bind-mounted
//! at their `mountPath`; the security context and memory limit become the
//! container's user, groups, read-only root, capabilities and cgroup
//! limit (`plan`). Images are never pulled: a missing image leaves the
//! container waiting with `ErrImageNeverPull`.
//!
//! Pods reach the API server, which listens on 127.0.0.1 only, through a
//! forwarder the kubelet runs on the bridge's gateway address, port 443
//! (a free port when binding 443 is refused);
//! pods resolve `kubernetes.default.svc` (a name the server certificate
//! carries) to the gateway, and their `KUBERNETES_SERVICE_HOST` names it.
//!
//! Every container and the network carry the label `dev.tusk.sandbox`
//! with an id derived from the data directory: a start removes what a
//! previous run of the same sandbox left, and [`DockerRuntime::clean`]
//! removes everything.

mod network;
pub(crate) mod plan;
mod run;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};

pub use run::{DockerContainer, DockerSpec};

/// The label every object the runtime creates carries.
pub const SANDBOX_LABEL: &str = "dev.tusk.sandbox";
/// The label naming the pod (its uid) a container belongs to.
pub const POD_LABEL: &str = "dev.tusk.pod-uid";
/// The image pause containers run: the base image the project's images
/// are built from (`scripts/build-images`).
pub const PAUSE_IMAGE: &str = "tusk.local/debian:bookworm";
/// The name pods resolve to the API server's forwarder.
pub const API_HOST: &str = "kubernetes.default.svc";

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error(
        "cannot reach the Docker engine (is it running, and is /var/run/docker.sock readable?): {0}"
    )]
    Connect(bollard::errors::Error),
    #[error("the Docker engine refused {what}: {source}")]
    Engine {
        what: String,
        source: bollard::errors::Error,
    },
    #[error(
        "image {0} is not present on this machine and the sandbox never pulls; build it with scripts/build-images"
    )]
    MissingImage(String),
    #[error("container has runAsNonRoot and image will run as root")]
    RunsAsRoot,
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({0}), cannot verify user is non-root"
    )]
    NonNumericUser(String),
    #[error("no free subnet for the sandbox network among 10.128.0.0/9 candidates: {0}")]
    NoSubnet(String),
    #[error("cannot listen for pods' API requests on {address}: {source}")]
    Forwarder {
        address: String,
        source: std::io::Error,
    },
}

pub(crate) fn engine(
    what: impl Into<String>,
) -> impl FnOnce(bollard::errors::Error) -> DockerError {
    let what = what.into();
    move |source| DockerError::Engine { what, source }
}

/// A connected Docker engine and the sandbox's network on it.
pub struct DockerRuntime {
    docker: Docker,
    /// Derived from the data directory; names the network and labels all.
    id: String,
    network: String,
    gateway: Ipv4Addr,
    /// The first and last pod address of the network's /24.
    range: (Ipv4Addr, Ipv4Addr),
    /// The forwarder's port on the gateway (443 unless it was refused).
    api_port: std::sync::atomic::AtomicU16,
}

impl std::fmt::Debug for DockerRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRuntime")
            .field("id", &self.id)
            .field("network", &self.network)
            .field("gateway", &self.gateway)
            .finish_non_exhaustive()
    }
}

/// The id of the sandbox in `data_dir`: a short hash of its path, the
/// value of the [`SANDBOX_LABEL`] of everything it creates.
pub fn sandbox_id(data_dir: &Path) -> String {
    let path = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_owned());
    let hash = path
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    format!("{:012x}", hash & 0xffff_ffff_ffff)
}

impl DockerRuntime {
    /// Connects to the local engine, removes what an earlier run of this
    /// sandbox left, and creates (or reuses) the sandbox's network.
    pub async fn connect(data_dir: &Path) -> Result<Arc<Self>, DockerError> {
        let docker = Docker::connect_with_local_defaults()
            .map_err(DockerError::Connect)?
            .negotiate_version()
            .await
            .map_err(DockerError::Connect)?;
        docker.ping().await.map_err(DockerError::Connect)?;
        let id = sandbox_id(data_dir);
        remove_labelled(&docker, &format!("{SANDBOX_LABEL}={id}")).await;
        let (network, gateway, range) = network::ensure(&docker, &id).await?;
        Ok(Arc::new(Self {
            docker,
            id,
            network,
            gateway,
            range,
            api_port: std::sync::atomic::AtomicU16::new(443),
        }))
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    pub fn gateway(&self) -> Ipv4Addr {
        self.gateway
    }

    /// The port pods reach the API server at on the gateway.
    pub fn api_port(&self) -> u16 {
        self.api_port.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The pod addresses of the network.
    pub fn address_range(&self) -> (Ipv4Addr, Ipv4Addr) {
        self.range
    }

    pub fn network(&self) -> &str {
        &self.network
    }

    /// The Docker name of a pod's container (`pause` for the pause one).
    pub fn container_name(&self, pod_uid: &str, container: &str) -> String {
        format!("tusk-{}-{pod_uid}-{container}", self.id)
    }

    pub(crate) fn labels(&self, pod_uid: &str) -> HashMap<String, String> {
        HashMap::from([
            (SANDBOX_LABEL.to_owned(), self.id.clone()),
            (POD_LABEL.to_owned(), pod_uid.to_owned()),
        ])
    }

    /// Fails with [`DockerError::MissingImage`] unless `image` is present.
    pub async fn require_image(&self, image: &str) -> Result<(), DockerError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Err(DockerError::MissingImage(image.to_owned())),
            Err(source) => Err(engine(format!("inspecting image {image}"))(source)),
        }
    }

    /// Checks, for a container with `runAsNonRoot` and no `runAsUser`, that
    /// `image`'s own user is a non-zero uid, as the kubelet does.
    pub async fn require_non_root_image(&self, image: &str) -> Result<(), DockerError> {
        let user = self
            .docker
            .inspect_image(image)
            .await
            .map_err(engine(format!("inspecting image {image}")))?
            .config
            .and_then(|c| c.user)
            .unwrap_or_default();
        let uid = user.split(':').next().unwrap_or_default();
        match uid.parse::<u32>() {
            Ok(0) => Err(DockerError::RunsAsRoot),
            Ok(_) => Ok(()),
            Err(_) if uid.is_empty() || uid == "root" => Err(DockerError::RunsAsRoot),
            Err(_) => Err(DockerError::NonNumericUser(user)),
        }
    }

    /// Starts the pod's pause container at `ip` (replacing one left
    /// behind); its name, for the pod's containers to join.
    pub async fn start_pause(
        &self,
        pod_uid: &str,
        hostname: &str,
        ip: Ipv4Addr,
    ) -> Result<String, DockerError> {
        self.require_image(PAUSE_IMAGE).await?;
        let name = self.container_name(pod_uid, "pause");
        remove(&self.docker, &name).await;
        let endpoint = EndpointSettings {
            ipam_config: Some(EndpointIpamConfig {
                ipv4_address: Some(ip.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(PAUSE_IMAGE.to_owned()),
            entrypoint: Some(vec!["sleep".into(), "infinity".into()]),
            hostname: Some(hostname.chars().take(63).collect()),
            labels: Some(self.labels(pod_uid)),
            host_config: Some(HostConfig {
                network_mode: Some(self.network.clone()),
                extra_hosts: Some(vec![format!("{API_HOST}:{}", self.gateway)]),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                init: Some(true),
                ..Default::default()
            }),
            networking_config: Some(bollard::models::NetworkingConfig {
                endpoints_config: Some(HashMap::from([(self.network.clone(), endpoint)])),
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        self.docker
            .create_container(Some(options), body)
            .await
            .map_err(engine(format!("creating {name}")))?;
        self.docker
            .start_container(&name, None)
            .await
            .map_err(engine(format!("starting {name}")))?;
        Ok(name)
    }

    /// Removes every container of the pod `pod_uid`, pause included.
    pub async fn remove_pod(&self, pod_uid: &str) {
        remove_labelled(&self.docker, &format!("{POD_LABEL}={pod_uid}")).await;
    }

    /// The label value of everything this sandbox creates.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// As [`DockerRuntime::clean`], through the `docker` client and
    /// without an async runtime: for `Drop` of test harnesses, which may
    /// run while their runtime shuts down.
    pub fn clean_blocking(&self) {
        let script = format!(
            "docker ps -aq --filter label={SANDBOX_LABEL}={id} | xargs -r docker rm -f >/dev/null 2>&1; \
             docker network rm {network} >/dev/null 2>&1; true",
            id = self.id,
            network = self.network
        );
        let _ = std::process::Command::new("sh")
            .args(["-c", &script])
            .status();
    }

    /// Removes every container of this sandbox, then its network.
    pub async fn clean(&self) {
        remove_labelled(&self.docker, &format!("{SANDBOX_LABEL}={}", self.id)).await;
        if let Err(error) = self.docker.remove_network(&self.network).await {
            tracing::debug!(%error, network = %self.network, "cannot remove the sandbox network");
        }
    }
}

/// Force-removes the container `name` if it exists.
pub(crate) async fn remove(docker: &Docker, name: &str) {
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(name, Some(options)).await;
}

/// Force-removes every container (running or not) with `label`.
async fn remove_labelled(docker: &Docker, label: &str) {
    let filters = HashMap::from([("label", vec![label])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let Ok(containers) = docker.list_containers(Some(options)).await else {
        return;
    };
    for container in containers {
        if let Some(id) = container.id {
            remove(docker, &id).await;
        }
    }
}

/// Relays connections from pods (on the gateway, port 443, or a free
/// port where 443 needs privileges the sandbox lacks) to the API server at
/// `api`, so pods reach a server that listens on loopback only. Pods are
/// told the port chosen ([`DockerRuntime::api_port`]).
pub fn forward_api(
    runtime: &DockerRuntime,
    api: std::net::SocketAddr,
) -> Result<tokio::task::JoinHandle<()>, DockerError> {
    let address = std::net::SocketAddr::from((runtime.gateway, 443));
    let error = |source| DockerError::Forwarder {
        address: address.to_string(),
        source,
    };
    let listener = std::net::TcpListener::bind(address)
        .or_else(|_| std::net::TcpListener::bind((runtime.gateway, 0)))
        .map_err(error)?;
    let port = listener.local_addr().map_err(error)?.port();
    runtime
        .api_port
        .store(port, std::sync::atomic::Ordering::Relaxed);
    listener.set_nonblocking(true).map_err(error)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(error)?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(api).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    }))
}
