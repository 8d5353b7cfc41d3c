//! The sandbox's node joined to kube-up's control plane, with Tusk
//! installed from `deploy/install.yaml`: what the referee tests that run
//! PostgreSQL on a real kube-apiserver share (`referee_node.rs`,
//! `referee_backup.rs`). Included by path by those binaries only, which
//! also have the end-to-end helpers (`common`).
// Each of those binaries uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Secret, Service};
use kube::{Api, Client};
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster};
use tusk_sandbox::node::kubelet::docker::{SANDBOX_LABEL, sandbox_id};
use tusk_sandbox::node::proxy::LocalAddresses;
use tusk_sandbox::testing::kube_up::{Components, KubeUp};
use tusk_sandbox::testing::{Images, build_images, eventually};

use crate::common::ApiServer;
use crate::referee;

/// The joined node's name, and the user its kubelet is.
pub const NODE: &str = "sandbox";
/// How long one kubectl command may take.
pub const KUBECTL: Duration = Duration::from_secs(120);

pub fn kubectl(up: &KubeUp, args: &[&str]) -> String {
    referee::kubectl(up, args, KUBECTL)
}

/// kube-up's control plane with the sandbox's node joined (Docker
/// runtime) and Tusk installed: the operator's Deployment rolled out on
/// the node.
pub struct Joined {
    // Dropped first: the node stops its containers while the API server
    // still answers.
    pub node: JoinedNode,
    pub client: Client,
    pub up: KubeUp,
    /// When the node was started.
    pub started: Instant,
}

impl Joined {
    /// Starts kube-up (with kube-controller-manager, kube-scheduler and
    /// an audit log), builds the images, installs Tusk and joins the node;
    /// `None` when the shared Kubernetes folder is absent (said on stderr).
    pub async fn start() -> Option<Self> {
        let up = KubeUp::start(Components {
            controller_manager: true,
            scheduler: true,
            audit: true,
        })?;
        build_images(Images::All {
            tusk_binary: PathBuf::from(env!("CARGO_BIN_EXE_tusk")),
        });
        referee::install(&up, KUBECTL);
        let node = JoinedNode::start(&up, &up.node_kubeconfig(NODE));
        let started = Instant::now();
        let client = up.client().await;
        eventually(
            "the node to register Ready",
            Duration::from_secs(60),
            || node_ready(&client),
        )
        .await;
        // The operator, as deploy/install.yaml runs it: a pod the
        // scheduler puts on the node, under its ServiceAccount.
        let wait = kubectl(
            &up,
            &[
                "-n",
                "tusk-system",
                "rollout",
                "status",
                "deployment/tusk-operator",
                "--timeout=120s",
            ],
        );
        eprintln!("{wait}");
        Some(Self {
            node,
            client,
            up,
            started,
        })
    }

    /// Waits up to `limit` until `name` in `default` is Ready with
    /// `instances` instances; fails the test with its status and the
    /// node's log otherwise.
    pub async fn wait_ready(&self, name: &str, instances: i32, limit: Duration) {
        let clusters: Api<PostgresCluster> = Api::namespaced(self.client.clone(), "default");
        let ready = tokio::time::timeout(limit, async {
            while !ready_instances(&clusters, name, instances).await {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await;
        assert!(
            ready.is_ok(),
            "{name} has not {instances} Ready instances after {limit:?}: {:?}\nnode log:\n{}",
            clusters.get(name).await.ok().and_then(|c| c.status),
            self.node.log()
        );
    }
}

impl ApiServer for Joined {
    fn kube(&self) -> &Client {
        &self.client
    }

    fn kubeconfig_path(&self) -> PathBuf {
        self.up.kubeconfig.clone()
    }
}

/// `tusk sandbox node`, stopped when dropped: SIGTERM, which stops every
/// container, then whatever is left of its containers, network and
/// Service addresses.
pub struct JoinedNode {
    child: Child,
    pub data_dir: tempfile::TempDir,
}

impl JoinedNode {
    fn start(up: &KubeUp, kubelet_kubeconfig: &Path) -> Self {
        // The Docker engine must reach the directory, and PostgreSQL's
        // socket path in an emptyDir must fit in 107 bytes.
        let data_dir = tempfile::Builder::new()
            .prefix("tusk-node")
            .tempdir_in("/var/tmp")
            .expect("a data directory");
        let log = std::fs::File::create(data_dir.path().join("node.log")).expect("the node's log");
        let child = Command::new(env!("CARGO_BIN_EXE_tusk"))
            .args([
                "sandbox",
                "node",
                "--runtime",
                "docker",
                "--node-name",
                NODE,
            ])
            .arg("--kubeconfig")
            .arg(&up.kubeconfig)
            .arg("--kubelet-kubeconfig")
            .arg(kubelet_kubeconfig)
            .arg("--client-ca-file")
            .arg(up.ca_file())
            .arg("--data-dir")
            .arg(data_dir.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log file"))
            .stderr(log)
            .spawn()
            .expect("tusk sandbox node starts");
        Self { child, data_dir }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.path().join("node.log")).unwrap_or_default()
    }

    /// The name Docker gives the container `container` of the pod `uid`.
    pub fn container(&self, uid: &str, container: &str) -> String {
        format!(
            "tusk-{}-{uid}-{container}",
            sandbox_id(self.data_dir.path())
        )
    }

    /// The address of this machine on the node's container network: where
    /// pods reach a server the test runs (the network's gateway).
    pub fn host_address_for_pods(&self) -> std::net::IpAddr {
        let network = format!("tusk-{}", sandbox_id(self.data_dir.path()));
        let output = Command::new("docker")
            .args([
                "network",
                "inspect",
                &network,
                "-f",
                "{{(index .IPAM.Config 0).Gateway}}",
            ])
            .output()
            .expect("docker runs");
        let text = String::from_utf8_lossy(&output.stdout);
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("the gateway of {network}: {text:?}"))
    }
}

impl Drop for JoinedNode {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = self.log();
        let tail: Vec<&str> = log.lines().rev().take(3).collect();
        eprintln!("the node's last lines: {tail:#?}");
        let id = sandbox_id(self.data_dir.path());
        let script = format!(
            "docker ps -aq --filter label={SANDBOX_LABEL}={id} | xargs -r docker rm -f >/dev/null 2>&1; \
             docker network rm tusk-{id} >/dev/null 2>&1; true"
        );
        let _ = Command::new("sh").args(["-c", &script]).status();
        // Removes the Service addresses a killed node left on lo.
        drop(LocalAddresses::new(&id));
    }
}

async fn node_ready(client: &Client) -> Option<()> {
    let node = Api::<Node>::all(client.clone()).get(NODE).await.ok()?;
    let conditions = node.status?.conditions?;
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
        .then_some(())
}

pub async fn ready_instances(clusters: &Api<PostgresCluster>, name: &str, instances: i32) -> bool {
    let Ok(cluster) = clusters.get(name).await else {
        return false;
    };
    cluster.status.is_some_and(|s| {
        s.phase == Some(ClusterPhase::Ready)
            && s.ready_instances == instances
            && s.current_primary.is_some()
    })
}

/// libpq settings for the Service `service` (in `default`) as the
/// application owner of `cluster`.
pub async fn app_conninfo(client: &Client, cluster: &str, service: &str) -> Result<String, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let ip = services
        .get(service)
        .await
        .map_err(|e| e.to_string())?
        .spec
        .and_then(|s| s.cluster_ip)
        .ok_or("no cluster IP")?;
    let secret = Api::<Secret>::namespaced(client.clone(), "default")
        .get(&format!("{cluster}-app"))
        .await
        .map_err(|e| e.to_string())?;
    let field = |key: &str| {
        let data = secret.data.clone().unwrap_or_default();
        data.get(key)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .unwrap_or_default()
    };
    Ok(format!(
        "host={ip} port=5432 user={} password={} dbname=app connect_timeout=3",
        field("username"),
        field("password")
    ))
}

/// A connection through the Service `service` as `cluster`'s application
/// owner.
pub async fn connect(
    client: &Client,
    cluster: &str,
    service: &str,
) -> Result<tokio_postgres::Client, String> {
    let conninfo = app_conninfo(client, cluster, service).await?;
    let (sql, connection) = tokio_postgres::connect(&conninfo, crate::common::tls::encrypted())
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sql)
}
