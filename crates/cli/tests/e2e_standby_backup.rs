//! Backups from a standby end to end, on the full sandbox with
//! real PostgreSQL, pgBackRest and the tests' S3-compatible server: in a
//! cluster of two archiving to S3, the primary's pgBackRest TLS server
//! listens once the cluster's server certificate names its pod's address;
//! a backup asked for with the default target (`preferReplica`) is then
//! taken on the standby, with a writer running through `-rw` all along;
//! a new cluster restored from that backup and the archived WAL has
//! every write acknowledged before the WAL was switched, and the sentinel
//! the primary wrote for the backup (what a restore rehearsal checks).

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::time::Duration;

use archive::{create_s3_secrets, object_store, superuser, switch_wal_and_wait_stored, tusk_ok};
use common::writer::WRITE_TIMEOUT;
use common::{NS, World, pod_ip, wait_for};
use serde_json::json;
use stores::S3Server;
use tusk_api::contract::BACKUP_SERVER_PORT;

const CLUSTER: &str = "sb";
const COPY: &str = "sb-copy";

fn spec(server: &S3Server, name: &str, instances: i32) -> serde_json::Value {
    json!({"instances": instances,
           "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
           "storage": {"size": "1Gi"},
           "backup": {"destination": object_store(server, name)}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_on_a_standby_restores_every_acknowledged_write() {
    let world = World::start().await;
    let server = S3Server::start_listening(&["wal"], world.host_address_for_pods());
    create_s3_secrets(&world, &server, NS, CLUSTER).await;
    world
        .create_cluster(CLUSTER, spec(&server, CLUSTER, 2))
        .await;
    world.wait_ready(CLUSTER, 2).await;
    let primary = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let standby = if primary == format!("{CLUSTER}-1") {
        format!("{CLUSTER}-2")
    } else {
        format!("{CLUSTER}-1")
    };

    // The primary's server runs once the certificate names its address
    // (the operator issues it again after the pods have addresses).
    let address = pod_ip(&world, &primary)
        .await
        .expect("the primary's address");
    wait_for(
        "the primary's pgBackRest server listening",
        Duration::from_secs(120),
        || async {
            tokio::net::TcpStream::connect((address.as_str(), BACKUP_SERVER_PORT))
                .await
                .is_ok()
        },
    )
    .await;

    // And once the primary created the stanza (which the standby's
    // pgBackRest reads): until then the backup would go to the primary.
    wait_for("the stanza created", Duration::from_secs(120), || async {
        let status = world.status(CLUSTER).await;
        tusk_api::conditions::is_true(
            &status.conditions,
            tusk_api::conditions::CONTINUOUS_ARCHIVING,
        )
    })
    .await;

    let writer = world.ledger_writer(CLUSTER, WRITE_TIMEOUT).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let said = tusk_ok(
        &world,
        &[
            "backup",
            CLUSTER,
            "-n",
            NS,
            "--name",
            "sb-standby",
            "--wait",
            "300",
        ],
        Duration::from_secs(330),
    )
    .await;
    println!("{said}");
    assert!(
        said.contains(&format!("sb-standby: Completed on {standby}: backup ")),
        "taken on the standby {standby}: {said}"
    );
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let acknowledged = writer.finish().await;
    // Every acknowledged write archived: the primary's archiver says so
    // (what status reports only at the operator's next pass).
    switch_wal_and_wait_stored(&world, CLUSTER, Duration::from_secs(120)).await;

    // Restored from the standby's backup and the archive: every write.
    create_s3_secrets(&world, &server, NS, COPY).await;
    let mut restored = spec(&server, COPY, 1);
    restored["bootstrap"] =
        json!({"recovery": {"cluster": CLUSTER, "source": object_store(&server, COPY)}});
    world.create_cluster(COPY, restored).await;
    world.wait_ready(COPY, 1).await;
    let (missing, rows) = world.missing_from_ledger(COPY, &acknowledged).await;
    println!(
        "{} writes acknowledged, {rows} rows restored from the standby's backup",
        acknowledged.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");

    // The sentinel the primary wrote for the backup before the standby
    // took it is in the copy (what a restore rehearsal checks).
    let sentinel: i64 = superuser(&world, NS, COPY)
        .await
        .query_one(
            "SELECT count(*) FROM tusk.backup_sentinel WHERE backup = 'sb-standby'",
            &[],
        )
        .await
        .expect("the sentinel table")
        .get(0);
    assert_eq!(sentinel, 1);
    world.shutdown().await;
}
