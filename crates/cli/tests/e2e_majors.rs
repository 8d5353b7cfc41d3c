//! Every major version Tusk supports runs in the sandbox: clusters of
//! PostgreSQL 16, 17 and 18 (from the installations `scripts/setup` makes,
//! which the sandbox maps `postgres:<major>` images to) become ready, serve
//! through their Services, and a replica of 16 streams from its primary.
//! A cluster of 18, the newest, archives its WAL to the tests' S3 server,
//! takes a backup, and a rehearsal restores it and passes every check.

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/s3.rs"]
#[allow(dead_code)]
mod s3;

use std::time::Duration;

use archive::{create_archiving_cluster_of, superuser, switch_wal_and_wait_archived, tusk_ok};
use common::{NS, World, count_rows, wait_for};
use s3::S3Server;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_postgresql_18_archives_backs_up_and_rehearses_a_restore() {
    let world = World::start().await;
    let server = S3Server::start_listening(&["wal"], world.host_address_for_pods());
    create_archiving_cluster_of(
        &world,
        &server,
        "bk18",
        18,
        json!({"verify": {"schedule": "0 0 1 1 *"}}),
    )
    .await;
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
    println!("PostgreSQL 18: backup and rehearsal {record:?}");
    world.shutdown().await;
}
