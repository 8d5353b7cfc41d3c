//! The kubelet's Docker runtime against the machine's Docker engine: pods
//! are containers of locally built images (scripts/build-images), with
//! real mounts and the security context and limits enforced as on a
//! cluster. Needs a running engine; fails (never skips) without one.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tusk_sandbox::kubelet::docker::DockerRuntime;
use tusk_sandbox::kubelet::{Backoff, ContainerRuntime, KubeletConfig};
use tusk_sandbox::node::proxy::cuts::Direction;
use tusk_sandbox::testing::{self, eventually};

const WAIT: Duration = Duration::from_secs(60);
const BASE: &str = "tusk.local/debian:bookworm";

/// A sandbox whose node runs pods on Docker; removes its containers and
/// network when dropped (and a start removes a previous run's).
struct DockerNode {
    client: Client,
    runtime: std::sync::Arc<DockerRuntime>,
    node: Option<tusk_sandbox::node::Node>,
    api: tusk_sandbox::Sandbox,
    dir: tempfile::TempDir,
}

impl DockerNode {
    async fn start() -> Self {
        testing::build_images(testing::Images::Base);
        let dir = tempfile::Builder::new()
            .prefix("tusk-docker")
            .tempdir_in("/var/tmp")
            .expect("temporary directory");
        let (api, client) = testing::serve(dir.path(), |config| config).await;
        let kubeconfig = std::fs::read_to_string(api.kubeconfig_path()).expect("kubeconfig");
        let mut config = KubeletConfig::new(dir.path(), kubeconfig, "/nonexistent/tusk".into())
            .expect("kubelet config");
        let runtime = DockerRuntime::connect(dir.path())
            .await
            .expect("the Docker engine is reachable (the docker runtime's tests need it)");
        config.runtime = ContainerRuntime::Docker(runtime.clone());
        config.backoff = Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(2),
            reset_after: Duration::from_secs(60),
        };
        config.status_interval = Duration::from_millis(100);
        let node =
            tusk_sandbox::node::Node::start_with(client.clone(), config).expect("node starts");
        Self {
            client,
            runtime,
            node: Some(node),
            api,
            dir,
        }
    }

    async fn stop(mut self) {
        if let Some(node) = self.node.take() {
            tokio::time::timeout(WAIT, node.shutdown())
                .await
                .expect("node stops in time");
        }
        self.runtime.clean().await;
    }

    async fn create(&self, pod: Value) -> Pod {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let pod: Pod = serde_json::from_value(pod).expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod created")
    }

    /// Waits for the pod's only container to terminate; its status.
    async fn terminated(&self, name: &str) -> Value {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        eventually(&format!("pod {name}'s container to end"), WAIT, || {
            let pods = pods.clone();
            async move {
                let pod = pods.get(name).await.ok()?;
                let status = serde_json::to_value(pod.status?).ok()?;
                let terminated = status["containerStatuses"][0]["state"]["terminated"].clone();
                (!terminated.is_null()).then_some(status)
            }
        })
        .await
    }

    async fn logs(&self, name: &str) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        pods.logs(name, &Default::default())
            .await
            .expect("pod logs")
    }
}

impl Drop for DockerNode {
    fn drop(&mut self) {
        // A failed test still leaves nothing behind on the engine.
        self.runtime.clean_blocking();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_with_a_read_only_root_writes_only_to_its_volumes() {
    let node = DockerNode::start().await;
    let secrets: Api<Secret> = Api::namespaced(node.client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret created");
    let script = "set -u; echo kept > /scratch/file && cat /scratch/file; \
        cat /etc/creds/password; echo; id -u; id -G; \
        test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-mounted; \
        exec 3<>/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT && echo api-reachable; \
        echo x > /etc/outside";
    node.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "readonly"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
            "containers": [{
                "name": "main", "image": BASE,
                "command": ["bash", "-c", script],
                "securityContext": {"readOnlyRootFilesystem": true,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                                 {"name": "creds", "mountPath": "/etc/creds", "readOnly": true}]
            }],
            "volumes": [{"name": "scratch", "emptyDir": {}},
                        {"name": "creds", "secret": {"secretName": "creds"}}]
        }
    }))
    .await;
    let status = node.terminated("readonly").await;
    let logs = node.logs("readonly").await;
    let terminated = &status["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 1, "{status}\n{logs}");
    assert_eq!(terminated["reason"], "Error");
    assert!(
        logs.contains("/etc/outside: Read-only file system"),
        "the write outside the volumes fails as on a cluster:\n{logs}"
    );
    for expected in [
        "kept\n",
        "s3cret\n",
        "1000\n",
        "token-mounted\n",
        "api-reachable\n",
    ] {
        assert!(logs.contains(expected), "{expected:?} in:\n{logs}");
    }
    assert!(
        logs.contains("1000 2000"),
        "fsGroup is a supplementary group: {logs}"
    );
    let ip: std::net::Ipv4Addr = status["podIP"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .expect("a pod IP");
    let (first, last) = node.runtime.address_range();
    assert!(first <= ip && ip <= last, "{ip} is on the sandbox network");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_over_its_memory_limit_is_oom_killed() {
    let node = DockerNode::start().await;
    node.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "hungry"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main", "image": BASE,
                // tail keeps a line that never ends: it grows until killed.
                "command": ["tail", "/dev/zero"],
                "resources": {"limits": {"memory": "32Mi"}}
            }]
        }
    }))
    .await;
    let status = node.terminated("hungry").await;
    let terminated = &status["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["reason"], "OOMKilled", "{status}");
    assert_eq!(terminated["exitCode"], 137, "{status}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_that_is_not_on_the_machine_is_never_pulled() {
    let node = DockerNode::start().await;
    let pod = node
        .create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "missing"},
            "spec": {"containers": [{"name": "main", "image": "tusk.local/absent:1"}]}
        }))
        .await;
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), "default");
    let reason = eventually("the container to wait for its image", WAIT, || {
        let pods = pods.clone();
        let name = pod.name_any();
        async move {
            let pod = pods.get(&name).await.ok()?;
            let status = serde_json::to_value(pod.status?).ok()?;
            let waiting = &status["containerStatuses"][0]["state"]["waiting"];
            (waiting["reason"] == "ErrImageNeverPull")
                .then(|| waiting["message"].as_str().unwrap_or_default().to_owned())
        }
    })
    .await;
    assert!(reason.contains("scripts/build-images"), "{reason}");
    node.stop().await;
}

/// Runs kubectl against the node's API server; its stdout.
fn kubectl(node: &DockerNode, args: &[&str]) -> String {
    let output = std::process::Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", node.api.kubeconfig_path())
        .env("HOME", node.dir.path())
        .output()
        .expect("kubectl runs (scripts/setup installs it)");
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_exec_probes_run_inside_the_container() {
    let node = DockerNode::start().await;
    node.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probed"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
            "containers": [{
                "name": "main", "image": BASE,
                "command": ["sleep", "infinity"],
                "readinessProbe": {"exec": {"command": ["test", "-f", "/scratch/ready"]},
                                   "periodSeconds": 1},
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]
            }],
            "volumes": [{"name": "scratch", "emptyDir": {}}]
        }
    }))
    .await;
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), "default");
    let container_state = |want_ready: bool| {
        let pods = pods.clone();
        async move {
            let pod = pods.get("probed").await.ok()?;
            let status = serde_json::to_value(pod.status?).ok()?;
            let container = &status["containerStatuses"][0];
            (!container["state"]["running"].is_null() && container["ready"] == want_ready)
                .then_some(())
        }
    };
    eventually("the container to run, not ready", WAIT, || {
        container_state(false)
    })
    .await;
    let user = kubectl(&node, &["exec", "probed", "--", "id", "-u"]);
    assert_eq!(user.trim(), "1000", "exec runs as the container's user");
    kubectl(&node, &["exec", "probed", "--", "touch", "/scratch/ready"]);
    eventually("the exec probe to pass", WAIT, || container_state(true)).await;
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_container_is_restarted_and_counted() {
    let node = DockerNode::start().await;
    node.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "victim"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": BASE, "command": ["sleep", "infinity"]}]
        }
    }))
    .await;
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), "default");
    let running_with = |restarts: i64| {
        let pods = pods.clone();
        async move {
            let pod = pods.get("victim").await.ok()?;
            let status = serde_json::to_value(pod.status?).ok()?;
            let container = &status["containerStatuses"][0];
            (!container["state"]["running"].is_null() && container["restartCount"] == restarts)
                .then(|| container.clone())
        }
    };
    eventually("the container to run", WAIT, || running_with(0)).await;
    let faults = node.node.as_ref().expect("node").faults();
    faults
        .kill("default", "victim", "main")
        .expect("the container's processes are known");
    let container = eventually("the container to run again", WAIT, || running_with(1)).await;
    assert_eq!(
        container["lastState"]["terminated"]["exitCode"], 137,
        "killed by SIGKILL: {container}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_non_root_refuses_an_image_that_runs_as_root() {
    let node = DockerNode::start().await;
    node.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "rooted"},
        "spec": {
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "main", "image": BASE, "command": ["true"]}]
        }
    }))
    .await;
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), "default");
    let message = eventually("the container to wait with a config error", WAIT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("rooted").await.ok()?;
            let status = serde_json::to_value(pod.status?).ok()?;
            let waiting = &status["containerStatuses"][0]["state"]["waiting"];
            (waiting["reason"] == "CreateContainerConfigError")
                .then(|| waiting["message"].as_str().unwrap_or_default().to_owned())
        }
    })
    .await;
    assert_eq!(
        message,
        "container has runAsNonRoot and image will run as root"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_termination_log_is_bound_at_its_path_and_read_at_the_end() {
    let node = DockerNode::start().await;
    node.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "reporter"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
            "containers": [{
                "name": "main", "image": BASE,
                "command": ["sh", "-c", "printf done-42 > \"$MSG\"; exit 3"],
                "env": [{"name": "MSG", "value": "/dev/termination-log"}],
                "securityContext": {"readOnlyRootFilesystem": true}
            }]
        }
    }))
    .await;
    let status = node.terminated("reporter").await;
    let terminated = &status["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 3, "{status}");
    assert_eq!(terminated["message"], "done-42", "{status}");
    node.stop().await;
}

/// What a connection from pod `from` to port 9 of `ip` (where nothing
/// listens) meets within 3 s: `refused` when the packets arrive, `timeout`
/// when they are dropped.
fn connect_from(node: &DockerNode, from: &str, ip: &str) -> &'static str {
    let script = format!("timeout 3 bash -c 'exec 3<>/dev/tcp/{ip}/9' 2>/dev/null; echo rc=$?");
    let answer = kubectl(node, &["exec", from, "--", "bash", "-c", &script]);
    match answer.trim() {
        "rc=1" => "refused",
        "rc=124" => "timeout",
        other => panic!("unexpected answer from {from} connecting to {ip}: {other}"),
    }
}

/// What a connection from the host to port 9 of `ip` meets.
fn connect_from_host(ip: &str) -> &'static str {
    let address = std::net::SocketAddr::new(ip.parse().expect("an IP"), 9);
    match std::net::TcpStream::connect_timeout(&address, Duration::from_secs(3)) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "refused",
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => "timeout",
        other => panic!("unexpected answer from the host connecting to {ip}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cut_off_from_its_peers_still_answers_the_host() {
    let node = DockerNode::start().await;
    for name in ["left", "right"] {
        node.create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": BASE, "command": ["sleep", "infinity"]}]
            }
        }))
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), "default");
    let ip_of = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await.ok()?;
            let status = pod.status?;
            let running = status.container_statuses?.first()?.state.clone()?.running;
            running.and(status.pod_ip)
        }
    };
    let left = eventually("left to run", WAIT, || ip_of("left")).await;
    let right = eventually("right to run", WAIT, || ip_of("right")).await;
    assert_eq!(connect_from(&node, "left", &right), "refused");
    assert_eq!(connect_from_host(&right), "refused");

    let faults = node.node.as_ref().expect("node").faults();
    faults
        .cut_peers("default", "right", Direction::Ingress)
        .expect("right is cut off from what its peers send");
    assert_eq!(connect_from(&node, "left", &right), "timeout");
    assert_eq!(
        connect_from_host(&right),
        "refused",
        "the host still reaches it"
    );
    assert_eq!(
        connect_from(&node, "right", &left),
        "timeout",
        "left's answer does not get in"
    );

    faults
        .cut_peers("default", "right", Direction::Egress)
        .expect("the cut is replaced by an egress one");
    assert_eq!(
        connect_from(&node, "left", &right),
        "timeout",
        "no answer gets out"
    );
    assert_eq!(
        connect_from_host(&right),
        "refused",
        "the host still reaches it"
    );

    faults
        .heal_peers("default", "right")
        .expect("the cut heals");
    assert_eq!(connect_from(&node, "left", &right), "refused");
    assert_eq!(connect_from(&node, "right", &left), "refused");
    node.stop().await;
}
