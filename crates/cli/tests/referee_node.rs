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
//! replicate it, fail over when the primary's container is killed while a
//! writer runs through `-rw` (losing none of its acknowledged writes), and
//! go with its pods and volumes when deleted. The kubelet authenticates as `system:node:sandbox` (a
//! client certificate signed by kube-up's CA), and kube-apiserver's Node
//! authorizer must admit every request it makes (one refused while the
//! authorizer has not yet seen a pod bound counts only when its retry is
//! refused too); kube-apiserver reads a
//! pod's log through the kubelet's HTTPS endpoint with its client
//! certificate.
//!
//! Where the shared folder is absent the test says so and returns.

mod common;
#[path = "referee/node.rs"]
mod node;
// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::writer::Writer;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use node::{Joined, JoinedNode, KUBECTL, NODE, app_conninfo, connect, kubectl};
use process::run_within;
use referee::OPERATOR;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_sandbox::testing::eventually;
use tusk_sandbox::testing::kube_up::AuditEvent;

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
    let container = node.container(&uid, "postgres");
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
    let Some(joined) = Joined::start().await else {
        return;
    };
    let (up, client, node, started) = (&joined.up, &joined.client, &joined.node, joined.started);
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get(NODE)
        .await
        .expect("the node's Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(NODE)
    );

    kubectl(
        up,
        &["apply", "--server-side", "-f", "deploy/examples/small.yaml"],
    );
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), "default");
    joined
        .wait_ready("small", 1, Duration::from_secs(300))
        .await;
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
        || async { connect(client, "small", "small-rw").await.ok() },
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

    // kubectl exec and cp through kube-apiserver, which sends the
    // WebSocket on to the kubelet (the node declares
    // ExtendWebSocketsToKubelet): a command's output, and a file copied in
    // with tar over the session's stdin and read back.
    let said = kubectl(
        up,
        &[
            "exec",
            "small-1",
            "-c",
            "postgres",
            "--",
            "sh",
            "-c",
            "echo exec-$((6*7))",
        ],
    );
    assert_eq!(said.trim(), "exec-42", "kubectl exec runs in the container");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let local = scratch.path().join("note.txt");
    std::fs::write(&local, "copied through kube-apiserver\n").expect("a file to copy");
    let local = local.to_string_lossy().into_owned();
    kubectl(
        up,
        &["cp", &local, "small-1:/tmp/note.txt", "-c", "postgres"],
    );
    let copied = kubectl(
        up,
        &[
            "exec",
            "small-1",
            "-c",
            "postgres",
            "--",
            "cat",
            "/tmp/note.txt",
        ],
    );
    assert_eq!(copied, "copied through kube-apiserver\n", "kubectl cp");

    // The kubelet's endpoint authorizes each caller with a
    // SubjectAccessReview: another certificate of kube-up's CA, whose user
    // RBAC grants nothing, is refused the instance's log (kube-apiserver's
    // own client certificate reads it below).
    let port = kubectl(
        up,
        &[
            "get",
            "node",
            NODE,
            "-o",
            "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}",
        ],
    );
    let (cert, key) = up.client_certificate("intruder", "/CN=intruder");
    let refused = run_within(
        Command::new("curl")
            .args(["-sk", "--max-time", "10", "--cert"])
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .arg(format!(
                "https://127.0.0.1:{}/containerLogs/default/small-1/postgres",
                port.trim()
            )),
        KUBECTL,
    );
    let said = String::from_utf8_lossy(&refused.stdout);
    assert!(
        said.contains("\"code\":403") && said.contains("user=intruder"),
        "the kubelet refuses a user RBAC does not allow: {said}"
    );

    // kube-apiserver relays pods/log to the kubelet over HTTPS with its
    // client certificate.
    let logs = kubectl(up, &["logs", "small-1", "-c", "postgres", "--tail=20"]);
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
    joined
        .wait_ready("small", 3, Duration::from_secs(420))
        .await;
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
            let replica = connect(client, "small", "small-ro").await.ok()?;
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
    // The Node authorizer learns of a pod bound to the node from its own
    // watch: a kubelet that reads a Secret of a pod it has just seen may be
    // refused once and is admitted on its next try (as real kubelets are).
    // A refusal counts when no later request of the same is admitted.
    let code = |e: &AuditEvent| e.response_status.as_ref().map(|s| s.code);
    let refused: Vec<String> = kubelet
        .iter()
        .enumerate()
        .filter(|(_, e)| code(e) == Some(403))
        .filter(|(at, e)| {
            !kubelet[at + 1..].iter().any(|later| {
                later.verb == e.verb
                    && later.request_uri == e.request_uri
                    && code(later).is_some_and(|c| c < 400)
            })
        })
        .map(|(_, e)| format!("{} {}", e.verb, e.request_uri))
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

    // A failover with a writer running through small-rw: the primary's
    // PostgreSQL container is killed until the operator chooses another
    // instance, which then serves every row and every acknowledged write.
    sql.batch_execute("CREATE TABLE ledger (id bigint PRIMARY KEY)")
        .await
        .expect("the writer's table");
    let conninfo = app_conninfo(client, "small", "small-rw")
        .await
        .expect("the application's connection settings");
    let writer = Writer::start_at(conninfo, "ledger", Duration::from_secs(5));
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let failover = fail_over(node, &clusters, &pods).await;
    writer.wait_for_more(20, Duration::from_secs(120)).await;
    let acknowledged = writer.finish().await;
    let rows = eventually(
        "every acknowledged row through small-rw on the new primary",
        Duration::from_secs(90),
        || async {
            let primary = connect(client, "small", "small-rw").await.ok()?;
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
    let primary = connect(client, "small", "small-rw")
        .await
        .expect("a connection to the new primary");
    let stored: std::collections::BTreeSet<i64> = primary
        .query("SELECT id FROM ledger", &[])
        .await
        .expect("the ledger")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let lost: Vec<i64> = acknowledged
        .iter()
        .copied()
        .filter(|id| !stored.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost in the failover: {lost:?}",
        lost.len(),
        acknowledged.len()
    );

    // Deleted: kube-controller-manager collects the pods, the kubelet
    // stops them, and the provisioner deletes the volumes of the claims
    // (kept by the default deletionPolicy Retain, then deleted by hand).
    let selector = tusk_api::labels::cluster_selector("small");
    kubectl(
        up,
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
    kubectl(up, &["delete", "pvc", "-l", &selector, "--timeout=120s"]);
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
        "failover {} -> {} chosen {:.0?} after the first kill; {} writes acknowledged, none lost",
        failover.0,
        failover.1,
        failover.2,
        acknowledged.len()
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
