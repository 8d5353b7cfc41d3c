//! Durability over the declared synchronous set, end to end: with
//! `FIRST 1` over three instances and `dataDurability: required`, the
//! primary and its `potential` standby are lost together. The status last
//! listed the other standby as `sync`, but the primary lists both in
//! `synchronous_standby_names` and either may be the synchronous one by
//! the time it fails: the standby left cannot prove it holds every
//! acknowledged commit, so the failover is blocked instead of promoting
//! it with "0 bytes lost". Once the lost standby answers again with its
//! final position, the proof holds and a standby is promoted with nothing
//! lost.

mod common;

use std::time::Duration;

use common::checks::every_acknowledged_write_kept;
use common::{NS, World, rejoins_without_accepting_a_write, wait_for};
use serde_json::json;
use tusk_api::conditions::{FAILOVER_BLOCKED, find_condition};

const CLUSTER: &str = "listed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_standby_lost_with_the_primary_blocks_a_required_failover_until_it_answers() {
    let world = World::start().await;
    let mut spec = common::durable_cluster(1);
    spec["replication"]["synchronous"]["mode"] = json!("first");
    world.create_cluster(CLUSTER, spec).await;
    world.wait_ready(CLUSTER, 3).await;
    let writer = world.ledger_writer(CLUSTER, Duration::from_secs(1)).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let listed = |state: &'static str| {
        let world = &world;
        async move {
            world
                .status(CLUSTER)
                .await
                .instances
                .iter()
                .find(|i| i.sync_state.as_deref() == Some(state))
                .map(|i| i.name.clone())
        }
    };
    wait_for(
        "a sync and a potential standby listed",
        Duration::from_secs(60),
        || async { listed("sync").await.is_some() && listed("potential").await.is_some() },
    )
    .await;
    let (Some(sync), Some(potential)) = (listed("sync").await, listed("potential").await) else {
        panic!("the listing changed");
    };
    let primary = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    println!("primary {primary}, sync {sync}, potential {potential}");

    let faults = world.node.as_ref().expect("node").faults();
    faults.freeze(NS, &potential, "postgres").expect("freeze");
    faults.freeze(NS, &primary, "postgres").expect("freeze");
    wait_for("FailoverBlocked", Duration::from_secs(90), || async {
        let s = world.status(CLUSTER).await;
        find_condition(&s.conditions, FAILOVER_BLOCKED).is_some_and(|c| c.status == "True")
    })
    .await;
    let s = world.status(CLUSTER).await;
    println!(
        "blocked: {}",
        find_condition(&s.conditions, FAILOVER_BLOCKED)
            .map(|c| c.message.as_str())
            .unwrap_or_default()
    );
    assert_eq!(
        s.target_primary.as_deref(),
        Some(primary.as_str()),
        "{sync} alone proves nothing: not promoted"
    );

    // The lost standby answers again, its WAL receiver stopped: proven.
    faults.thaw(NS, &potential, "postgres").expect("thaw");
    wait_for("a standby promoted", Duration::from_secs(90), || async {
        let s = world.status(CLUSTER).await;
        s.current_primary.as_ref().is_some_and(|p| *p != primary)
            && s.current_primary == s.target_primary
    })
    .await;
    let record = world.status(CLUSTER).await.last_failover.expect("recorded");
    println!("promoted {} ({})", record.to, record.reason);
    assert_eq!(record.reason, "Failover", "no approval was needed");
    assert_eq!(record.lsn_gap_bytes, 0);
    writer.wait_for_more(10, Duration::from_secs(60)).await;
    every_acknowledged_write_kept(&world, CLUSTER, writer).await;
    faults.thaw(NS, &primary, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &primary).await;
}
