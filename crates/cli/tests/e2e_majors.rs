//! Every major version Tusk supports runs in the sandbox: clusters of
//! PostgreSQL 16, 17 and 18 (from the installations `scripts/setup` makes,
//! which the sandbox maps `postgres:<major>` images to) become ready, serve
//! through their Services, and a replica of 16 streams from its primary.

mod common;

use std::time::Duration;

use common::{World, count_rows, wait_for};
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
