//! Every major version Tusk supports runs in the sandbox: clusters of
//! PostgreSQL 16, 17 and 18 (from the installations `scripts/setup` makes,
//! which the sandbox maps `postgres:<major>` images to) become ready, serve
//! through their Services, and a replica of 16 streams from its primary.
//! A cluster of 18, the newest, archives its WAL to a directory on a
//! shared volume (a `file://` repository), takes a backup there, a
//! rehearsal restores it and passes every check, and a new cluster
//! restored from the volume has every archived row.

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::time::Duration;

use archive::{
    create_shared_claim, superuser, switch_wal_and_wait_archived, switch_wal_and_wait_stored,
    tusk_ok,
};
use common::{NS, World, count_rows, wait_for};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_of_postgresql_16_17_and_18_serve_and_replicate() {
    let world = World::start().await;
    for (name, major, instances) in [("pg16", 16, 2), ("pg17", 17, 1), ("pg18", 18, 1)] {
        world
            .create_cluster(
                name,
                json!({"instances": instances, "storage": {"size": "1Gi"},
                       "postgres": {"version": major, "parameters": {"shared_buffers": "16MB"}},
                       "failover": {"dataDurability": "preferred"}}),
            )
            .await;
    }
    for (name, major, instances) in [("pg16", 16, 2), ("pg17", 17, 1), ("pg18", 18, 1)] {
        world.wait_ready(name, instances).await;
        let status = world.status(name).await;
        assert_eq!(status.postgres_version, Some(major), "{name}");
        let client = world.connect(&format!("{name}-rw"), name).await;
        let version: String = client
            .query_one("show server_version", &[])
            .await
            .expect("query")
            .get(0);
        assert!(
            version.starts_with(&format!("{major}.")),
            "{name} runs PostgreSQL {version}"
        );
        println!("{name}: PostgreSQL {version}");
    }
    let primary = world.connect("pg16-rw", "pg16").await;
    primary
        .batch_execute(
            "create table orders (id int primary key); insert into orders select generate_series(1, 50)",
        )
        .await
        .expect("write through -rw");
    wait_for(
        "the rows on the PostgreSQL 16 replica through -ro",
        Duration::from_secs(30),
        || async { count_rows(&world, "pg16-ro", "pg16").await == 50 },
    )
    .await;
    world.shutdown().await;
}

/// A cluster of 18 with its repository on a volume: `spec` with a
/// `file://` destination on claim `repository`.
fn on_the_volume(spec: serde_json::Value) -> serde_json::Value {
    let mut cluster = json!({"instances": 1, "storage": {"size": "1Gi"},
        "postgres": {"version": 18, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
        "backup": {"destination": {"url": "file:///pg", "volumeClaim": "repository"}}});
    for (key, value) in spec.as_object().cloned().unwrap_or_default() {
        cluster[key] = value;
    }
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_postgresql_18_archives_to_a_volume_backs_up_rehearses_and_restores() {
    let world = World::start().await;
    create_shared_claim(&world, NS, "repository").await;
    let mut spec = on_the_volume(json!({}));
    spec["backup"]["verify"] = json!({"schedule": "0 0 1 1 *"});
    world.create_cluster("bk18", spec).await;
    world.wait_ready("bk18", 1).await;
    let primary = superuser(&world, NS, "bk18").await;
    primary
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await
        .expect("write");
    switch_wal_and_wait_archived(&world, "bk18", Duration::from_secs(240)).await;

    let said = tusk_ok(
        &world,
        &[
            "backup",
            "bk18",
            "-n",
            NS,
            "--name",
            "bk18-full",
            "--wait",
            "300",
        ],
        Duration::from_secs(330),
    )
    .await;
    assert!(
        said.contains("bk18-full: Completed on bk18-1: backup "),
        "{said}"
    );
    let said = tusk_ok(
        &world,
        &["rehearse", "bk18", "-n", NS, "--wait", "300"],
        Duration::from_secs(330),
    )
    .await;
    assert!(said.contains(" passed in "), "{said}");
    let record = world
        .status("bk18")
        .await
        .last_restore_verification
        .expect("the rehearsal recorded");
    assert!(record.succeeded, "{record:?}");
    println!("PostgreSQL 18 on a volume: backup and rehearsal {record:?}");

    // Rows committed after the backup come back from the archived WAL.
    primary
        .batch_execute("INSERT INTO t SELECT generate_series(101, 150)")
        .await
        .expect("write after the backup");
    switch_wal_and_wait_stored(&world, "bk18", Duration::from_secs(240)).await;
    world
        .create_cluster(
            "rs18",
            on_the_volume(json!({"bootstrap": {"recovery": {"cluster": "bk18",
                "source": {"url": "file:///pg", "volumeClaim": "repository"}}}})),
        )
        .await;
    world.wait_ready("rs18", 1).await;
    let restored = superuser(&world, NS, "rs18").await;
    let rows: i64 = restored
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 150, "every row archived before the restore");
    // It archives to its own path on the same volume.
    switch_wal_and_wait_stored(&world, "rs18", Duration::from_secs(240)).await;
    world.shutdown().await;
}
