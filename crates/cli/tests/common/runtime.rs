//! What runs the end-to-end tests' pods: host processes (the default) or
//! containers of this machine's Docker engine, from the images
//! scripts/build-images makes of this build (kept when unchanged). A
//! Docker test fails, never skips, without an engine.

use std::path::Path;
use std::sync::Arc;

use kube::Client;
use tusk_operator::config::OperatorConfig;
use tusk_sandbox::kubelet::docker::DockerRuntime;
use tusk_sandbox::kubelet::{ContainerRuntime, KubeletConfig};
use tusk_sandbox::node::Node;
use tusk_sandbox::testing::{Images, build_images};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Process,
    Docker,
}

impl Runtime {
    /// The runtime `TUSK_E2E_RUNTIME` names; a value that is none of them
    /// fails the test rather than run it elsewhere.
    pub fn from_env() -> Self {
        match std::env::var("TUSK_E2E_RUNTIME").as_deref() {
            Err(_) | Ok("" | "process") => Self::Process,
            Ok("docker") => Self::Docker,
            Ok(other) => panic!("TUSK_E2E_RUNTIME={other:?} is neither process nor docker"),
        }
    }
}

/// The test's sandbox directory: the Docker engine must reach it, and
/// PostgreSQL's socket path in an emptyDir must fit 107 bytes. Both
/// runtimes honour `TMPDIR` (scripts/test points it at a tmpfs); without
/// it the Docker runtime's is in /var/tmp, which the engine always sees.
pub fn test_dir(runtime: Runtime) -> tempfile::TempDir {
    match runtime {
        Runtime::Process => tempfile::tempdir(),
        Runtime::Docker => tempfile::Builder::new().prefix("tusk-e2e").tempdir_in(
            std::env::var_os("TMPDIR").map_or_else(|| "/var/tmp".into(), std::path::PathBuf::from),
        ),
    }
    .expect("temp dir")
}

/// How often the node's kubelet refreshes pods' Secret volumes: the
/// kubelet's sync period (a minute by default, `syncFrequency`),
/// shortened so that a renewed certificate or a rotated password reaches
/// the pods in seconds, and the tests that wait for one take seconds.
const VOLUME_REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts the node on `runtime`; the operator's settings for it, and the
/// Docker runtime to clean up after.
pub async fn start_node(
    runtime: Runtime,
    client: Client,
    dir: &Path,
    kubeconfig: &Path,
) -> (Node, OperatorConfig, Option<Arc<DockerRuntime>>) {
    let tusk = std::path::PathBuf::from(env!("CARGO_BIN_EXE_tusk"));
    let mut config = OperatorConfig::default();
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let mut kubelet = KubeletConfig::new(dir, text, tusk.clone()).expect("kubelet config");
    kubelet.volume_refresh = VOLUME_REFRESH;
    if runtime == Runtime::Process {
        if let Some((uid, gid)) = tusk_sandbox::kubelet::postgres_identity() {
            config.postgres_uid = i64::from(uid);
            config.postgres_gid = i64::from(gid);
        }
        let node = Node::start_with(client, kubelet).expect("node");
        return (node, config, None);
    }
    build_images(Images::All {
        tusk_binary: tusk.clone(),
    });
    // The images scripts/build-images made, as deploy/install.yaml names
    // them (the image's own postgres user is the default 999).
    config.default_postgres_image = tusk_operator::install::postgres_image_template();
    let docker = DockerRuntime::connect(dir)
        .await
        .expect("the Docker engine is reachable (the docker runtime's tests need it)");
    kubelet.runtime = ContainerRuntime::Docker(docker.clone());
    let node = Node::start_with(client, kubelet).expect("node");
    (node, config, Some(docker))
}

impl super::World {
    /// The host's address as pods see it, for a server a test starts on
    /// the host for pods to use: the Docker network's gateway on that
    /// runtime; `None` (loopback) with processes.
    pub fn host_address_for_pods(&self) -> Option<std::net::IpAddr> {
        self.docker
            .as_ref()
            .map(|docker| std::net::IpAddr::V4(docker.gateway()))
    }
}
