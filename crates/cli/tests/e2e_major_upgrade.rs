//! Major upgrades end to end (R27), on the full sandbox with real
//! PostgreSQL 15, 16 and 17 (the installations `scripts/setup` makes):
//!
//! - a declared newer major with no recent backup waits, with a
//!   `MajorUpgrade` condition naming the field and the override, and
//!   nothing is stopped;
//! - with the override, a two-instance cluster of 15 with a writer is
//!   upgraded to 16 while the operator is killed in the middle: every
//!   acknowledged row, the index and the function are there after, the
//!   replica is cloned again and streams, and the write pause is printed;
//! - a cluster of 15 with extensions (`citext`, a `pg_trgm` index) is
//!   upgraded to 17;
//! - a cluster of 15 using `citext`, which the PostgreSQL 16 installation
//!   lacks, fails `pg_upgrade --check`: the upgrade is `Failed` naming the
//!   missing library, and the cluster serves its data with 15 again.

mod common;

use std::time::{Duration, Instant};

use common::writer::Writer;
use common::{World, wait_for};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tusk_api::conditions::{MAJOR_UPGRADE, find_condition};
use tusk_api::labels::UPGRADE_WITHOUT_BACKUP;
use tusk_api::v1alpha1::ClusterPhase;

fn cluster_of_15(instances: i32) -> serde_json::Value {
    json!({"instances": instances, "storage": {"size": "1Gi"},
           "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
           "failover": {"dataDurability": "preferred"}})
}

async fn declare(world: &World, cluster: &str, major: i32) {
    let patch = json!({"spec": {"postgres": {"version": major},
                                "upgrade": {"approvedVersion": major}}});
    world
        .clusters()
        .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the approved version declared");
}

async fn allow_without_backup(world: &World, cluster: &str, major: i32) {
    let patch = json!({"metadata": {"annotations": {UPGRADE_WITHOUT_BACKUP: major.to_string()}}});
    world
        .clusters()
        .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the override annotated");
}

async fn upgrade_step(world: &World, cluster: &str) -> Option<String> {
    world.status(cluster).await.upgrade.map(|u| u.step)
}

async fn server_major(world: &World, service: &str, cluster: &str) -> String {
    world
        .connect(service, cluster)
        .await
        .query_one("show server_version", &[])
        .await
        .expect("the version")
        .get::<_, String>(0)
}

/// Waits until `cluster`'s upgrade reaches `step`, printing the steps it
/// goes through; returns them.
async fn follow(world: &World, cluster: &str, step: &str, limit: Duration) -> Vec<String> {
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let current = upgrade_step(world, cluster).await;
        if let Some(current) = current.filter(|c| seen.last() != Some(c)) {
            println!("{cluster} {:>6.1?} {current}", started.elapsed());
            seen.push(current);
        }
        if seen.last().map(String::as_str) == Some(step) {
            return seen;
        }
        assert!(
            started.elapsed() < limit,
            "{cluster} did not reach {step} within {limit:?}; steps: {seen:?}; status: {:?}",
            world.status(cluster).await.upgrade
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn major_upgrades_wait_for_a_backup_keep_every_row_resume_after_a_kill_and_roll_back() {
    let mut world = World::start().await;
    world.create_cluster("up16", cluster_of_15(2)).await;
    world.create_cluster("up17", cluster_of_15(1)).await;
    world.create_cluster("bad16", cluster_of_15(1)).await;
    world.wait_ready("up16", 2).await;
    world.wait_ready("up17", 1).await;
    world.wait_ready("bad16", 1).await;

    let up16 = world.connect("up16-rw", "up16").await;
    up16.batch_execute(
        "create table orders (id bigint primary key, note text);
         insert into orders select g, 'order ' || g from generate_series(1, 5000) g;
         create index orders_note on orders (note);
         create function order_note(bigint) returns text language plpgsql
           as $$ begin return (select note from orders where id = $1); end $$;",
    )
    .await
    .expect("data on 15");
    world.create_ledger("up16").await;
    for cluster in ["up17", "bad16"] {
        world
            .connect(&format!("{cluster}-rw"), cluster)
            .await
            .batch_execute(
                "create extension citext; create extension pg_trgm;
                 create table names (id int primary key, name citext);
                 insert into names select g, 'Name ' || g from generate_series(1, 2000) g;
                 create index names_trgm on names using gin ((name::text) gin_trgm_ops);",
            )
            .await
            .expect("extensions on 15");
    }

    // No backup: the upgrade waits, saying why, and stops nothing.
    let before = world.status("up16").await;
    declare(&world, "up16", 16).await;
    wait_for(
        "up16 waiting for a backup",
        Duration::from_secs(30),
        || async { upgrade_step(&world, "up16").await.as_deref() == Some("WaitingForBackup") },
    )
    .await;
    let status = world.status("up16").await;
    let condition = find_condition(&status.conditions, MAJOR_UPGRADE).expect("the condition");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "NoRecentBackup")
    );
    assert!(
        condition.message.contains("spec.upgrade.backupMaxAgeHours")
            && condition.message.contains(UPGRADE_WITHOUT_BACKUP),
        "{}",
        condition.message
    );
    assert_eq!(status.postgres_version, Some(15));
    assert_eq!(status.ready_instances, 2);
    assert_eq!(status.current_primary, before.current_primary);
    assert!(
        server_major(&world, "up16-rw", "up16")
            .await
            .starts_with("15.")
    );

    // With the override, under a writer, the operator killed mid-way.
    let writer = Writer::start(&world, "up16-rw", "up16", "ledger").await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    declare(&world, "up17", 17).await;
    declare(&world, "bad16", 16).await;
    let started = Instant::now();
    for (cluster, major) in [("up16", 16), ("up17", 17), ("bad16", 16)] {
        allow_without_backup(&world, cluster, major).await;
    }
    follow(&world, "up16", "Upgrading", Duration::from_secs(120)).await;
    world.restart_operator().await;
    let steps = follow(&world, "up16", "Completed", Duration::from_secs(300)).await;
    assert!(steps.contains(&"StartingPrimary".to_owned()), "{steps:?}");
    world.wait_ready("up16", 2).await;
    let took = started.elapsed();
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let pause = writer.longest_pause_since(started);
    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger("up16", &acknowledged).await;
    println!(
        "up16: 15 -> 16 in {took:.1?} (to replicas streaming); longest write pause {pause:.1?}; \
         {} writes acknowledged, {stored} stored, {} lost",
        acknowledged.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");

    let status = world.status("up16").await;
    assert_eq!(status.postgres_version, Some(16));
    let record = status.upgrade.expect("the record");
    let recorded: Vec<&str> = record.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(
        recorded,
        [
            "StoppingInstances",
            "Upgrading",
            "StartingPrimary",
            "RecloningReplicas",
            "Completed"
        ]
    );
    assert!(record.backup_override.is_some());
    assert!(
        server_major(&world, "up16-rw", "up16")
            .await
            .starts_with("16.")
    );
    assert!(
        server_major(&world, "up16-ro", "up16")
            .await
            .starts_with("16.")
    );
    let up16 = world.connect("up16-rw", "up16").await;
    let row = up16
        .query_one(
            "select count(*), order_note(4242),
                    (select count(*) from pg_indexes where indexname = 'orders_note')
             from orders",
            &[],
        )
        .await
        .expect("the data on 16");
    assert_eq!(row.get::<_, i64>(0), 5000);
    assert_eq!(row.get::<_, String>(1), "order 4242");
    assert_eq!(row.get::<_, i64>(2), 1);
    wait_for(
        "the rows on the cloned replica of 16, through -ro",
        Duration::from_secs(60),
        || async { common::count_rows(&world, "up16-ro", "up16").await == 5000 },
    )
    .await;

    follow(&world, "up17", "Completed", Duration::from_secs(300)).await;
    world.wait_ready("up17", 1).await;
    assert!(
        server_major(&world, "up17-rw", "up17")
            .await
            .starts_with("17.")
    );
    let row = world
        .connect("up17-rw", "up17")
        .await
        .query_one(
            "select count(*) filter (where name = 'NAME 7'),
                    (select count(*) from pg_extension where extname in ('citext', 'pg_trgm')),
                    (select count(*) from pg_indexes where indexname = 'names_trgm')
             from names",
            &[],
        )
        .await
        .expect("the data on 17");
    assert_eq!(
        (
            row.get::<_, i64>(0),
            row.get::<_, i64>(1),
            row.get::<_, i64>(2)
        ),
        (1, 2, 1),
        "citext compares without case, both extensions and the index are there"
    );

    // citext is not in the PostgreSQL 16 installation: the check fails,
    // nothing was changed, and 15 serves the data again.
    follow(&world, "bad16", "Failed", Duration::from_secs(300)).await;
    let status = world.status("bad16").await;
    let record = status.upgrade.clone().expect("the record");
    let message = record.message.unwrap_or_default();
    assert!(message.starts_with("check failed"), "{message}");
    assert!(message.contains("citext"), "{message}");
    let condition = find_condition(&status.conditions, MAJOR_UPGRADE).expect("the condition");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Failed")
    );
    world.wait_ready("bad16", 1).await;
    assert!(
        server_major(&world, "bad16-rw", "bad16")
            .await
            .starts_with("15.")
    );
    let names: i64 = world
        .connect("bad16-rw", "bad16")
        .await
        .query_one("select count(*) from names", &[])
        .await
        .expect("the data on 15")
        .get(0);
    assert_eq!(names, 2000);
    let status = world.status("bad16").await;
    assert_eq!(status.postgres_version, Some(15));
    assert_ne!(status.phase, Some(ClusterPhase::Upgrading));
    world.shutdown().await;
}
