//! A whole sandbox node for one test: API server, kubelet, endpoints
//! controller and Service proxy on a temporary data directory, restartable
//! on the same directory. The API server and its client come from
//! [`tusk_sandbox::testing`].

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tempfile::TempDir;
use tusk_sandbox::Sandbox;
use tusk_sandbox::controllers::node_lifecycle::NodeLifecycleConfig;
use tusk_sandbox::kubelet::{
    Backoff, ImageMapping, ImageRule, KubeletConfig, KubeletFaults, Runtime,
};
use tusk_sandbox::testing;
pub use tusk_sandbox::testing::eventually;

pub const WAIT: Duration = Duration::from_secs(30);
/// The image tests use for shell-script containers; mapped to host programs.
pub const SHELL: &str = "sandbox.test/shell:1";

pub struct Node {
    pub dir: TempDir,
    pub client: Client,
    lifecycle: NodeLifecycleConfig,
    api: Option<Sandbox>,
    node: Option<tusk_sandbox::node::Node>,
}

fn kubelet_config(dir: &Path, sandbox: &Sandbox) -> KubeletConfig {
    let kubeconfig = std::fs::read_to_string(sandbox.kubeconfig_path()).expect("kubeconfig");
    let mut config = KubeletConfig::new(dir, kubeconfig, PathBuf::from("/nonexistent/tusk"))
        .expect("kubelet config");
    let mut images = ImageMapping::default();
    images.rules.push(ImageRule {
        image: "sandbox.test/shell".into(),
        runtime: Runtime::Host,
    });
    config.images = images;
    config.backoff = Backoff {
        initial: Duration::from_millis(500),
        max: Duration::from_secs(2),
        reset_after: Duration::from_secs(60),
    };
    config.status_interval = Duration::from_millis(100);
    config.heartbeat = Duration::from_secs(2);
    config.volume_refresh = Duration::from_millis(500);
    config
}

async fn boot(
    dir: &Path,
    lifecycle: NodeLifecycleConfig,
) -> (Sandbox, Client, tusk_sandbox::node::Node) {
    let (sandbox, client) = testing::serve(dir, |config| config).await;
    let config = kubelet_config(dir, &sandbox);
    let node = tusk_sandbox::node::Node::start_configured(client.clone(), config, lifecycle)
        .expect("node starts");
    (sandbox, client, node)
}

impl Node {
    pub async fn start() -> Self {
        Self::start_with_lifecycle(NodeLifecycleConfig::default()).await
    }

    /// As [`Node::start`], with the node lifecycle controller's timings.
    pub async fn start_with_lifecycle(lifecycle: NodeLifecycleConfig) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (api, client, node) = boot(dir.path(), lifecycle).await;
        Self {
            dir,
            client,
            lifecycle,
            api: Some(api),
            node: Some(node),
        }
    }

    /// Stops everything (containers gracefully) and starts again on the
    /// same data directory.
    pub async fn restart(&mut self) {
        self.stop().await;
        let (api, client, node) = boot(self.dir.path(), self.lifecycle).await;
        self.api = Some(api);
        self.client = client;
        self.node = Some(node);
    }

    pub async fn stop(&mut self) {
        if let Some(node) = self.node.take() {
            tokio::time::timeout(WAIT, node.shutdown())
                .await
                .expect("node stops in time");
        }
        if let Some(mut api) = self.api.take() {
            api.stop();
        }
    }

    /// The admin kubeconfig of the running API server, for kubectl.
    pub fn kubeconfig(&self) -> PathBuf {
        self.api
            .as_ref()
            .expect("API server running")
            .kubeconfig_path()
            .to_owned()
    }

    /// The directory of a pod (its containers' `HOME`).
    pub fn pod_dir(&self, pod: &Pod) -> PathBuf {
        self.dir.path().join("pods").join(format!(
            "{}_{}_{}",
            pod.namespace().unwrap_or_default(),
            pod.name_any(),
            pod.uid().unwrap_or_default()
        ))
    }

    /// The API server's fault handles (partitions, injected failures).
    pub fn api_faults(&self) -> tusk_sandbox::Faults {
        self.api
            .as_ref()
            .expect("API server running")
            .faults()
            .clone()
    }

    pub fn faults(&self) -> KubeletFaults {
        self.node.as_ref().expect("node running").faults()
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub async fn create_pod(&self, namespace: &str, pod: Value) -> Pod {
        let pod: Pod = serde_json::from_value(pod).expect("pod manifest");
        self.pods(namespace)
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created")
    }

    /// The directory of a pod's container logs.
    pub fn log(&self, pod: &Pod, container: &str, restart: i32) -> PathBuf {
        self.dir
            .path()
            .join("pods")
            .join(format!(
                "{}_{}_{}",
                pod.namespace().unwrap_or_default(),
                pod.name_any(),
                pod.uid().unwrap_or_default()
            ))
            .join("logs")
            .join(container)
            .join(format!("{restart}.log"))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Dropping the node aborts the kubelet's tasks, and dropping a task
        // drops its processes, which kills their process groups.
        self.node.take();
        self.api.take();
    }
}

/// What a container printed, from its log file's CRI lines
/// (`<time> <stream> <F|P> <content>`); `None` while the file is missing.
pub fn log_text(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut shown = String::new();
    for line in text.lines() {
        let mut fields = line.splitn(4, ' ');
        let (_, _, tag) = (fields.next(), fields.next(), fields.next());
        shown.push_str(fields.next().unwrap_or(""));
        if tag == Some("F") {
            shown.push('\n');
        }
    }
    Some(shown)
}

/// The pod as JSON, for assertions on status fields.
pub async fn pod_json(api: &Api<Pod>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|p| serde_json::to_value(p).expect("pod serializes"))
}

pub fn condition(pod: &Value, type_: &str) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

pub fn uid_of(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2) != Some("Z"))
        .unwrap_or(false)
}

/// Creates the Secret `creds` (`password`: `s3cret`) in `namespace`.
pub async fn create_secret(node: &Node, namespace: &str) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(node.client.clone(), namespace);
    let secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "creds"},
        "stringData": {"password": "s3cret"}
    }))
    .expect("secret");
    secrets
        .create(&kube::api::PostParams::default(), &secret)
        .await
        .expect("secret created");
}
