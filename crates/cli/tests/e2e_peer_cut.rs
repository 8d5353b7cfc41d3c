//! A primary cut off from its replicas (R25), on the Docker runtime, where
//! every pod has a network namespace of its own: packets between the
//! primary's pod and the other pods are dropped, established replication
//! connections included, while the primary still reaches the API server
//! and its clients still reach it through `-rw`.
//!
//! With `ANY 1` synchronous replication and `dataDurability: required`,
//! the primary must acknowledge no commit while no standby confirms one,
//! the operator must not promote a standby of a primary that holds its
//! lease and answers (even with `delaySeconds: 0`), the standbys must be
//! reported not ready (not streaming), and once the cut heals the writes
//! go on with nothing lost, on the same primary.

mod common;

use std::time::{Duration, Instant};

use common::checks::{every_acknowledged_write_kept, primaries};
use common::runtime::Runtime;
use common::{NS, World, wait_for};
use tusk_sandbox::node::proxy::cuts::Direction;

const CLUSTER: &str = "peers";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_cut_off_from_its_replicas_acknowledges_nothing_and_stays_the_only_primary() {
    let world = World::start_on(Runtime::Docker).await;
    let (writer, primary) = world.durable_cluster_with_writer(CLUSTER, 0).await;
    let faults = world.node.as_ref().expect("node").faults();

    faults
        .cut_peers(NS, &primary, Direction::Both)
        .expect("the primary is cut off from its peers");
    let cut = Instant::now();
    // A commit whose confirmation was under way at the cut may still be
    // acknowledged; none after.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acknowledged_then = writer.acknowledged();
    wait_for(
        "both standbys reported not ready (not streaming)",
        Duration::from_secs(60),
        || async {
            let s = world.status(CLUSTER).await;
            s.instances
                .iter()
                .filter(|i| i.name != primary && !i.ready)
                .count()
                == 2
        },
    )
    .await;
    // Held long enough for a failover with no delay to be decided, were
    // the operator to take an isolated primary for a failed one.
    let held_until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < held_until {
        let s = world.status(CLUSTER).await;
        let primaries = primaries(&s);
        assert!(primaries.len() <= 1, "two primaries: {primaries:?}");
        assert_eq!(s.current_primary.as_deref(), Some(primary.as_str()));
        assert_eq!(s.target_primary.as_deref(), Some(primary.as_str()));
        assert!(s.last_failover.is_none(), "{:?}", s.last_failover);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let acknowledged_during = writer.acknowledged() - acknowledged_then;
    println!(
        "cut for {:?}: {acknowledged_then} writes acknowledged before, {acknowledged_during} while no standby confirmed",
        cut.elapsed()
    );
    assert_eq!(
        acknowledged_during, 0,
        "a commit was acknowledged with no synchronous standby reachable"
    );

    faults.heal_peers(NS, &primary).expect("the cut heals");
    let healed = Instant::now();
    writer.wait_for_more(20, Duration::from_secs(90)).await;
    println!(
        "writes acknowledged again {:?} after the heal",
        healed.elapsed()
    );
    world.wait_replicating(CLUSTER, 3).await;
    let s = world.status(CLUSTER).await;
    assert_eq!(s.current_primary.as_deref(), Some(primary.as_str()));
    assert!(s.last_failover.is_none(), "{:?}", s.last_failover);
    every_acknowledged_write_kept(&world, CLUSTER, writer).await;
    world.shutdown().await;
}
