//! Backups and restores on a real control plane: kube-up's
//! kube-apiserver, kube-controller-manager and kube-scheduler (v1.36, from
//! the shared Kubernetes folder) with the sandbox's node joined (Docker
//! runtime) and Tusk installed from `deploy/install.yaml`. A cluster
//! archives to the tests' S3-compatible server over HTTPS with a private
//! CA; `tusk backup --wait` (a PostgresBackup the installed operator
//! carries out under its own RBAC) is taken with a writer running; a new
//! cluster bootstrapped from that backup and the archived WAL holds every
//! write acknowledged before the WAL was switched, and the sentinel the
//! backup left.
//!
//! Where the shared folder is absent the test says so and returns.

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "referee/node.rs"]
mod node;
// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::collections::BTreeSet;
use std::time::Duration;

use archive::{create_s3_secrets, object_store, superuser, switch_wal_and_wait_stored, tusk_ok};
use common::writer::{WRITE_TIMEOUT, Writer};
use kube::Api;
use kube::api::PostParams;
use node::{Joined, app_conninfo, connect};
use serde_json::json;
use stores::S3Server;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_sandbox::testing::wait_for;

const CLUSTER: &str = "bk";
const COPY: &str = "bk-copy";

fn spec(server: &S3Server, name: &str) -> serde_json::Value {
    json!({"instances": 1,
           "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
           "storage": {"size": "1Gi"},
           "backup": {"destination": object_store(server, name)}})
}

async fn create(joined: &Joined, name: &str, spec: serde_json::Value) {
    let cluster: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .expect("a cluster");
    Api::<PostgresCluster>::namespaced(joined.client.clone(), "default")
        .create(&PostParams::default(), &cluster)
        .await
        .expect("kube-apiserver accepts the cluster");
}

/// The ids in `cluster`'s ledger, read through its `-rw` Service.
async fn ledger(joined: &Joined, cluster: &str) -> BTreeSet<i64> {
    connect(&joined.client, cluster, &format!("{cluster}-rw"))
        .await
        .expect("a connection through -rw")
        .query("SELECT id FROM ledger", &[])
        .await
        .expect("the ledger")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_on_kube_apiserver_restores_every_acknowledged_write() {
    let Some(joined) = Joined::start().await else {
        return;
    };
    let server = S3Server::start_listening(&["wal"], Some(joined.node.host_address_for_pods()));
    create_s3_secrets(&joined, &server, "default", CLUSTER).await;
    create(&joined, CLUSTER, spec(&server, CLUSTER)).await;
    joined
        .wait_ready(CLUSTER, 1, Duration::from_secs(300))
        .await;
    wait_for(
        "the stanza created and archiving",
        Duration::from_secs(180),
        || async {
            Api::<PostgresCluster>::namespaced(joined.client.clone(), "default")
                .get(CLUSTER)
                .await
                .ok()
                .and_then(|c| c.status)
                .is_some_and(|s| {
                    tusk_api::conditions::is_true(
                        &s.conditions,
                        tusk_api::conditions::CONTINUOUS_ARCHIVING,
                    )
                })
        },
    )
    .await;

    connect(&joined.client, CLUSTER, &format!("{CLUSTER}-rw"))
        .await
        .expect("a connection through -rw")
        .batch_execute("CREATE TABLE ledger (id bigint PRIMARY KEY)")
        .await
        .expect("the writer's table");
    let conninfo = app_conninfo(&joined.client, CLUSTER, &format!("{CLUSTER}-rw"))
        .await
        .expect("the application's connection settings");
    let writer = Writer::start_at(conninfo, "ledger", WRITE_TIMEOUT);
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let said = tusk_ok(
        &joined,
        &["backup", CLUSTER, "--name", "nightly", "--wait", "300"],
        Duration::from_secs(330),
    )
    .await;
    println!("{said}");
    assert!(
        said.contains("nightly: Completed on bk-1: backup "),
        "the backup completed on the primary: {said}"
    );
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let acknowledged = writer.finish().await;
    switch_wal_and_wait_stored(&joined, CLUSTER, Duration::from_secs(120)).await;

    create_s3_secrets(&joined, &server, "default", COPY).await;
    let mut restored = spec(&server, COPY);
    restored["bootstrap"] =
        json!({"recovery": {"cluster": CLUSTER, "source": object_store(&server, COPY)}});
    create(&joined, COPY, restored).await;
    joined.wait_ready(COPY, 1, Duration::from_secs(420)).await;
    let stored = ledger(&joined, COPY).await;
    let lost: Vec<i64> = acknowledged
        .iter()
        .copied()
        .filter(|id| !stored.contains(id))
        .collect();
    println!(
        "{} writes acknowledged, {} rows restored from the backup and the archive on kube-apiserver",
        acknowledged.len(),
        stored.len()
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    let sentinels: Vec<String> = superuser(&joined, "default", COPY)
        .await
        .query("SELECT backup FROM tusk.backup_sentinel", &[])
        .await
        .expect("the sentinel table")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        sentinels,
        ["nightly"],
        "the backup's sentinel is in the restored copy"
    );
}
