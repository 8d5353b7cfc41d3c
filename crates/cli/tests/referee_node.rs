//! The sandbox's node joined to a real control plane: kube-up's
//! kube-apiserver, kube-controller-manager and kube-scheduler (v1.36, from
//! the shared Kubernetes folder), with `tusk sandbox node --kubeconfig`
//! running pods on the Docker runtime. `deploy/install.yaml` is applied
//! as a user would; its Deployment's pod (the operator under its own
//! ServiceAccount) is scheduled onto the node like any workload. A
//! PostgresCluster must then become Ready, take a write and give it back
//! through its `-rw` Service (a cluster IP of kube-apiserver's service
//! range, routed by the node's proxy from the Endpoints
//! kube-controller-manager writes), and grow to three instances that
//! replicate it, fail over when the primary's container is killed, and go
//! with its pods and volumes when deleted. The kubelet authenticates as `system:node:sandbox` (a
//! client certificate signed by kube-up's CA), and kube-apiserver's Node
//! authorizer must refuse none of its requests; kube-apiserver reads a
//! pod's log through the kubelet's HTTPS endpoint with its client
//! certificate.
//!
//! Where the shared folder is absent the test says so and returns.

// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, Pod, Secret, Service};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use process::run_within;
use referee::OPERATOR;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster};
use tusk_sandbox::node::kubelet::docker::{SANDBOX_LABEL, sandbox_id};
use tusk_sandbox::node::proxy::LocalAddresses;
use tusk_sandbox::testing::kube_up::{AuditEvent, Components, KubeUp};
use tusk_sandbox::testing::{Images, build_images, eventually};

const NODE: &str = "sandbox";
const KUBECTL: Duration = Duration::from_secs(120);

fn kubectl(up: &KubeUp, args: &[&str]) -> String {
    referee::kubectl(up, args, KUBECTL)
}

/// `tusk sandbox node`, stopped when dropped: SIGTERM, which stops every
/// container, then whatever is left of its containers, network and
/// Service addresses.
struct JoinedNode {
    child: Child,
    data_dir: tempfile::TempDir,
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

    fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.path().join("node.log")).unwrap_or_default()
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

async fn ready_instances(clusters: &Api<PostgresCluster>, name: &str, instances: i32) -> bool {
    let Ok(cluster) = clusters.get(name).await else {
        return false;
    };
    cluster.status.is_some_and(|s| {
        s.phase == Some(ClusterPhase::Ready)
            && s.ready_instances == instances
            && s.current_primary.is_some()
    })
}

/// A connection through the Service `service` as the application owner.
async fn connect(client: &Client, service: &str) -> Result<tokio_postgres::Client, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let ip = services
        .get(service)
        .await
        .map_err(|e| e.to_string())?
        .spec
        .and_then(|s| s.cluster_ip)
        .ok_or("no cluster IP")?;
    let secret = Api::<Secret>::namespaced(client.clone(), "default")
        .get("small-app")
        .await
        .map_err(|e| e.to_string())?;
    let field = |key: &str| {
        let data = secret.data.clone().unwrap_or_default();
        data.get(key)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .unwrap_or_default()
    };
    let conninfo = format!(
        "host={ip} port=5432 user={} password={} dbname=app connect_timeout=3",
        field("username"),
        field("password")
    );
    let tls = tokio_postgres_rustls::MakeRustlsConnect::new(
        tusk_sandbox::unverified_tls::client_config().map_err(|e| e.to_string())?,
    );
    let (sql, connection) = tokio_postgres::connect(&conninfo, tls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sql)
}

/// Kills the primary's PostgreSQL container (through Docker, as a crash
/// would) until the operator targets another instance; returns the
/// former and the new primary and how long the choice took.
async fn fail_over(
    node: &JoinedNode,
    clusters: &Api<PostgresCluster>,
    pods: &Api<Pod>,
) -> (String, String, Duration) {
    let status = |clusters: Api<PostgresCluster>| async move {
        clusters
            .get("small")
            .await
            .ok()
            .and_then(|c| c.status)
            .unwrap_or_default()
    };
    let old = status(clusters.clone())
        .await
        .current_primary
        .expect("a primary");
    let uid = pods
        .get(&old)
        .await
        .ok()
        .and_then(|p| p.metadata.uid)
        .expect("the primary's pod");
    let container = format!("tusk-{}-{uid}-postgres", sandbox_id(node.data_dir.path()));
    let started = Instant::now();
    loop {
        // Not running between restarts: nothing to kill then.
        let _ = Command::new("docker")
            .args(["kill", &container])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let now = status(clusters.clone()).await;
        if let Some(new) = now.target_primary.as_ref().filter(|t| **t != old) {
            let record = now.last_failover.expect("the failover is recorded");
            assert_eq!(
                record.lsn_gap_bytes, 0,
                "a synchronous standby loses nothing"
            );
            return (old, new.clone(), started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no failover from {old} in 120 s: {now:#?}\nnode log:\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_runs_on_the_sandbox_node_joined_to_kube_up() {
    let Some(up) = KubeUp::start(Components {
        controller_manager: true,
        scheduler: true,
        audit: true,
    }) else {
        return;
    };
    build_images(Images::All {
        tusk_binary: PathBuf::from(env!("CARGO_BIN_EXE_tusk")),
    });
    referee::install(&up, KUBECTL);
    let node = JoinedNode::start(&up, &up.node_kubeconfig(NODE));
    let client = up.client().await;
    let started = Instant::now();

    eventually(
        "the node to register Ready",
        Duration::from_secs(60),
        || node_ready(&client),
    )
    .await;
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get(NODE)
        .await
        .expect("the node's Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(NODE)
    );

    // The operator, as deploy/install.yaml runs it: a pod the scheduler
    // puts on the node, under its ServiceAccount.
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

    kubectl(
        &up,
        &["apply", "--server-side", "-f", "deploy/examples/small.yaml"],
    );
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), "default");
    let ready = tokio::time::timeout(Duration::from_secs(300), async {
        while !ready_instances(&clusters, "small", 1).await {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await;
    assert!(
        ready.is_ok(),
        "the 1-instance cluster is not Ready after 300 s: {:?}\nnode log:\n{}",
        clusters.get("small").await.ok().and_then(|c| c.status),
        node.log()
    );
    let ready_after = started.elapsed();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = pods.get("small-1").await.expect("the instance's pod");
    assert_eq!(
        pod.spec.and_then(|s| s.node_name).as_deref(),
        Some(NODE),
        "bound to the node"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let scheduled = events
        .list(&ListParams::default().fields("involvedObject.name=small-1,reason=Scheduled"))
        .await
        .expect("events");
    assert!(
        !scheduled.items.is_empty(),
        "kube-scheduler bound the pod (a Scheduled event)"
    );

    let sql = eventually(
        "a connection through small-rw",
        Duration::from_secs(60),
        || async { connect(&client, "small-rw").await.ok() },
    )
    .await;
    sql.batch_execute("CREATE TABLE referee (id int PRIMARY KEY, note text)")
        .await
        .expect("a table is created through small-rw");
    sql.execute("INSERT INTO referee VALUES (1, 'on kube-apiserver')", &[])
        .await
        .expect("a row is written through small-rw");
    let note: String = sql
        .query_one("SELECT note FROM referee WHERE id = 1", &[])
        .await
        .expect("the row is read back")
        .get(0);
    assert_eq!(note, "on kube-apiserver");

    // kube-apiserver relays pods/log to the kubelet over HTTPS with its
    // client certificate.
    let logs = kubectl(&up, &["logs", "small-1", "-c", "postgres", "--tail=20"]);
    assert!(
        !logs.trim().is_empty(),
        "kubectl logs shows the instance's log"
    );

    // Three instances: the new ones clone the primary and replicate, one
    // of them synchronously, so a failover loses no acknowledged write.
    clusters
        .patch(
            "small",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {
                "instances": 3,
                "replication": {"synchronous": {"mode": "any", "number": 1}},
                "failover": {"delaySeconds": 5, "dataDurability": "required"},
            }})),
        )
        .await
        .expect("the cluster grows to 3 instances");
    let grown = tokio::time::timeout(Duration::from_secs(420), async {
        while !ready_instances(&clusters, "small", 3).await {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await;
    assert!(
        grown.is_ok(),
        "3 instances are not Ready after 420 s: {:?}",
        clusters.get("small").await.ok().and_then(|c| c.status)
    );
    eventually(
        "a standby confirming commits",
        Duration::from_secs(120),
        || async {
            let status = clusters.get("small").await.ok()?.status?;
            status
                .instances
                .iter()
                .any(|i| matches!(i.sync_state.as_deref(), Some("quorum" | "sync")))
                .then_some(())
        },
    )
    .await;
    sql.execute("INSERT INTO referee VALUES (2, 'replicated')", &[])
        .await
        .expect("a second row is written through small-rw");
    let replicated = eventually(
        "the second row on a replica, through small-ro",
        Duration::from_secs(60),
        || async {
            let replica = connect(&client, "small-ro").await.ok()?;
            let in_recovery: bool = replica
                .query_one("SELECT pg_is_in_recovery()", &[])
                .await
                .ok()?
                .get(0);
            let rows = replica
                .query("SELECT note FROM referee WHERE id = 2", &[])
                .await
                .ok()?;
            let note: String = rows.first()?.get(0);
            in_recovery.then_some(note)
        },
    )
    .await;
    assert_eq!(replicated, "replicated");

    // The kubelet ran all this as its node, which the Node authorizer
    // admitted: not one of its requests was refused.
    let kubelet: Vec<AuditEvent> = up
        .audit()
        .into_iter()
        .filter(|e| e.user.username == format!("system:node:{NODE}"))
        .collect();
    let refused: Vec<String> = kubelet
        .iter()
        .filter(|e| e.response_status.as_ref().is_some_and(|s| s.code == 403))
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(
        kubelet.len() > 20,
        "the kubelet authenticates as system:node:{NODE} ({} requests)",
        kubelet.len()
    );
    assert!(
        refused.is_empty(),
        "requests of the kubelet kube-apiserver refused: {refused:#?}"
    );
    // The kubectl plugin against kube-apiserver: status from the
    // cluster's status, plan from each instance manager through
    // kube-apiserver's pod proxy.
    for (command, expected) in [
        (["status", "small"], "Ready  (3/3 instances ready)"),
        (
            ["plan", "small"],
            "Nothing to do: the cluster is as declared.",
        ),
    ] {
        let output = run_within(
            Command::new(env!("CARGO_BIN_EXE_tusk"))
                .args(command)
                .env("KUBECONFIG", &up.kubeconfig),
            KUBECTL,
        );
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && text.contains(expected),
            "tusk {command:?} ({:?}) says {expected:?}:\n{text}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // Converged: the operator writes nothing more while nothing changes,
    // but the renewals of its leader Lease, counted by kube-apiserver.
    let operator_writes = |events: Vec<AuditEvent>| -> Vec<String> {
        events
            .into_iter()
            .filter(|e| e.user.username == OPERATOR && e.is_write())
            .filter(|e| !e.request_uri.contains("/leases/"))
            .map(|e| format!("{} {}", e.verb, e.request_uri))
            .collect()
    };
    let before = operator_writes(up.audit()).len();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let after = operator_writes(up.audit());
    let converged_writes = &after[before.min(after.len())..];
    assert!(
        converged_writes.is_empty(),
        "the operator's writes once 3 instances were Ready: {converged_writes:#?}"
    );

    // A failover: the primary's PostgreSQL container is killed until the
    // operator chooses another instance, which then serves every row.
    let failover = fail_over(&node, &clusters, &pods).await;
    let rows = eventually(
        "every acknowledged row through small-rw on the new primary",
        Duration::from_secs(90),
        || async {
            let primary = connect(&client, "small-rw").await.ok()?;
            let in_recovery: bool = primary
                .query_one("SELECT pg_is_in_recovery()", &[])
                .await
                .ok()?
                .get(0);
            let count: i64 = primary
                .query_one("SELECT count(*) FROM referee", &[])
                .await
                .ok()?
                .get(0);
            (!in_recovery).then_some(count)
        },
    )
    .await;
    assert_eq!(rows, 2, "no acknowledged row is lost in the failover");

    // Deleted: kube-controller-manager collects the pods, the kubelet
    // stops them, and the provisioner deletes the volumes of the claims
    // (kept by the default deletionPolicy Retain, then deleted by hand).
    let selector = tusk_api::labels::cluster_selector("small");
    kubectl(
        &up,
        &["delete", "postgrescluster", "small", "--timeout=120s"],
    );
    eventually(
        "the cluster's pods gone",
        Duration::from_secs(120),
        || async {
            let left = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            left.items.is_empty().then_some(())
        },
    )
    .await;
    kubectl(&up, &["delete", "pvc", "-l", &selector, "--timeout=120s"]);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    eventually(
        "the claims' volumes deleted",
        Duration::from_secs(60),
        || async {
            volumes
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        },
    )
    .await;

    eprintln!(
        "failover {} -> {} chosen {:.0?} after the first kill",
        failover.0, failover.1, failover.2
    );
    eprintln!(
        "on kube-up with the sandbox node: 1 instance Ready {:.0?} after the node started, 3 instances {:.0?}; the kubelet made {} requests as its node, none refused",
        ready_after,
        started.elapsed(),
        kubelet.len()
    );
    eprintln!(
        "the operator made {before} writes besides its Lease to get there, none in 20 s after"
    );
}
