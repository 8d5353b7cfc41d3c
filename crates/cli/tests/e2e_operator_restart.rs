//! The operator killed in the middle of a failover (R25), on the full
//! sandbox with real PostgreSQL: once while the failover delay runs and
//! once right after it chose the new primary, with a writer running
//! through `-rw`. The new operator must finish the same failover (one
//! decision, from the frozen primary to one standby), lose no
//! acknowledged write, and the former primary must rejoin as a standby
//! without accepting a write.
//! On both runtimes.

mod common;

use std::time::{Duration, Instant};

use common::checks::every_acknowledged_write_kept;
use common::runtime::Runtime;
use common::{NS, World, rejoins_without_accepting_a_write, wait_for};

const CLUSTER: &str = "restart";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_survives_the_operator_being_killed_twice_in_its_middle() {
    operator_killed_twice(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_failover_survives_the_operator_being_killed_twice_in_its_middle() {
    operator_killed_twice(Runtime::Docker).await;
}

async fn operator_killed_twice(runtime: Runtime) {
    let mut world = World::start_on(runtime).await;
    let (writer, old) = world.durable_cluster_with_writer(CLUSTER, 3).await;

    let faults = world.node.as_ref().expect("node").faults();
    faults.freeze(NS, &old, "postgres").expect("freeze");
    let frozen = Instant::now();
    // Killed while the failover delay runs: the new operator counts from
    // the moment recorded in status, and watches the lease anew.
    tokio::time::sleep(Duration::from_secs(2)).await;
    world.restart_operator().await;
    let mut decided = None;
    let started = Instant::now();
    while decided.is_none() {
        let s = world.status(CLUSTER).await;
        decided = s.target_primary.filter(|t| *t != old);
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no failover from the frozen {old}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let new = decided.expect("decided");
    // Killed right after the decision, before the promotion was seen.
    world.restart_operator().await;
    println!(
        "failover {old} -> {new} decided {:?} after the freeze",
        frozen.elapsed()
    );
    wait_for(
        "the new primary serving",
        Duration::from_secs(90),
        || async { world.status(CLUSTER).await.current_primary.as_deref() == Some(new.as_str()) },
    )
    .await;
    let record = world.status(CLUSTER).await.last_failover.expect("recorded");
    assert_eq!(
        (
            record.from.as_str(),
            record.to.as_str(),
            record.reason.as_str()
        ),
        (old.as_str(), new.as_str(), "Failover"),
        "one failover, finished by the restarted operator"
    );
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    println!(
        "longest time without an acknowledged write: {:?}",
        writer.longest_pause_since(frozen)
    );
    faults.thaw(NS, &old, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    every_acknowledged_write_kept(&world, CLUSTER, writer).await;
    world.shutdown().await;
}
