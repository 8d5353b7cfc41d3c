//! Downtime of an operator-driven major upgrade (R27), measured on the
//! full sandbox with real PostgreSQL: figures printed, nothing asserted
//! but that no acknowledged write is lost.
//!
//! A one-instance cluster of PostgreSQL 15 is loaded with about `MIB`
//! MiB (a table of 200-byte rows with its primary key), a writer inserts
//! through `-rw` (a connection attempt or a write given up after 1 s,
//! every acknowledgement timed), and the cluster is upgraded to `MAJOR`
//! (the backup requirement waived by the override annotation). Printed:
//! the time to each step of `status.upgrade` from the override, the
//! longest time without an acknowledged write (the downtime a client
//! sees), and the upgrade pod's own duration.
//!
//! ```sh
//! cargo bench -p tusk --bench major_upgrade -- [MIB] [MAJOR]
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::World;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const CLUSTER: &str = "upg";
/// Bytes a row of the loaded table takes, roughly (200 of text, the
/// tuple's header and its index entry).
const ROW_BYTES: u64 = 270;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let numbers = common::bench_numbers();
    let mib = numbers.first().copied().unwrap_or(1024).max(1);
    let major = numbers.get(1).copied().unwrap_or(17);
    let world = World::start().await;
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 1, "storage": {"size": "8Gi"},
                   "postgres": {"version": 15, "parameters": {"shared_buffers": "64MB"}},
                   "failover": {"dataDurability": "preferred"}}),
        )
        .await;
    world.wait_ready(CLUSTER, 1).await;
    let rows = mib * 1024 * 1024 / ROW_BYTES;
    let loading = Instant::now();
    let client = world.connect(&format!("{CLUSTER}-rw"), CLUSTER).await;
    client
        .batch_execute(&format!(
            "create table big (id bigint primary key, pad text);
             insert into big select g, repeat('x', 200) from generate_series(1, {rows}) g;"
        ))
        .await
        .expect("the data loaded");
    let size: i64 = client
        .query_one("select pg_database_size(current_database())", &[])
        .await
        .expect("the size")
        .get(0);
    println!(
        "PostgreSQL 15 database of {} MiB ({rows} rows), loaded in {:.1?}",
        size / 1024 / 1024,
        loading.elapsed()
    );

    let writer = world.ledger_writer(CLUSTER, Duration::from_secs(1)).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let patch = json!({
        "metadata": {"annotations": {tusk_api::labels::UPGRADE_WITHOUT_BACKUP: major.to_string()}},
        "spec": {"postgres": {"version": major}, "upgrade": {"approvedVersion": major}}});
    let started = Instant::now();
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the upgrade declared");
    let mut steps: Vec<(String, Duration)> = Vec::new();
    let deadline = started + Duration::from_secs(900);
    loop {
        let step = world.status(CLUSTER).await.upgrade.map(|u| u.step);
        if let Some(step) = step.filter(|s| steps.last().is_none_or(|(last, _)| last != s)) {
            steps.push((step, started.elapsed()));
        }
        match steps.last().map(|(s, _)| s.as_str()) {
            Some("Completed") => break,
            Some("Failed") => panic!(
                "the upgrade failed: {:?}",
                world.status(CLUSTER).await.upgrade
            ),
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "no end to the upgrade: {steps:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    world.wait_ready(CLUSTER, 1).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let pause = writer.longest_pause_since(started);
    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    let record = world.status(CLUSTER).await.upgrade.expect("the record");
    println!("15 -> {major}, {} MiB, one instance:", size / 1024 / 1024);
    for (step, at) in &steps {
        println!("  {step:<20} at {:6.2} s", at.as_secs_f64());
    }
    println!(
        "  longest time without an acknowledged write: {:.2} s",
        pause.as_secs_f64()
    );
    println!(
        "  {} writes acknowledged, {stored} stored, {} lost; the upgrade: {}",
        acknowledged.len(),
        missing.len(),
        record.message.unwrap_or_default()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    let count: i64 = world
        .connect(&format!("{CLUSTER}-rw"), CLUSTER)
        .await
        .query_one("select count(*) from big", &[])
        .await
        .expect("the data upgraded")
        .get(0);
    assert_eq!(u64::try_from(count).unwrap_or_default(), rows);
    world.shutdown().await;
}
