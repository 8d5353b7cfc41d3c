//! The node lost (R25, the failure matrix's node loss), on the full
//! sandbox with real PostgreSQL and a writer running through `-rw`. The
//! sandbox has one node, so every instance goes with it: the kubelet stops
//! reporting and acting, and the node's pods are cut off from the API
//! server. Two ways:
//!
//! - a power loss: every process of every pod is SIGKILLed;
//! - a partition: the processes run on and clients still reach the
//!   primary (through the Service proxy), but its instance manager cannot
//!   renew the primary lease, so it must stop acknowledging writes within
//!   the lease's duration.
//!
//! While the node is away no standby can be promoted (none reaches the
//! API server, none could take the primary lease), so the operator must
//! not decide a failover to an instance it cannot reach. Once the node is
//! back the cluster must serve again with exactly one primary and every
//! acknowledged write. On both runtimes.

mod common;

use std::time::{Duration, Instant};

use common::checks::{every_acknowledged_write_kept, primaries};
use common::runtime::Runtime;
use common::{World, wait_for};
use tusk_sandbox::kubelet::Processes;

const CLUSTER: &str = "lost";
/// The sandbox's only node.
const NODE: &str = "sandbox";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_node_loses_power_comes_back_with_every_acknowledged_write() {
    node_lost(Runtime::Process, Processes::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_cluster_whose_node_loses_power_comes_back_with_every_acknowledged_write() {
    node_lost(Runtime::Docker, Processes::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_on_a_partitioned_node_stops_acknowledging_within_its_lease() {
    node_lost(Runtime::Process, Processes::Keep).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_primary_on_a_partitioned_node_stops_acknowledging_within_its_lease() {
    node_lost(Runtime::Docker, Processes::Keep).await;
}

/// The primary lease's duration at `delaySeconds: 2` (its minimum).
const LEASE: Duration = Duration::from_secs(2);

async fn node_lost(runtime: Runtime, processes: Processes) {
    let world = World::start_on(runtime).await;
    let (writer, old) = world.durable_cluster_with_writer(CLUSTER, 2).await;
    let faults = world.node.as_ref().expect("node").faults();

    let lost = Instant::now();
    world.partitions().cut_node(NODE);
    faults.lose_node(processes);
    // A commit under way may still be acknowledged: after a power loss
    // none can be, on a partition none after the lease's duration.
    let settled = match processes {
        Processes::Keep => LEASE,
        _ => Duration::ZERO,
    };
    tokio::time::sleep(settled).await;
    let acknowledged_then = writer.acknowledged();
    // Longer than the failover delay and the primary lease together.
    let away_until = lost + Duration::from_secs(10);
    while Instant::now() < away_until {
        let s = world.status(CLUSTER).await;
        assert_eq!(
            s.target_primary.as_deref(),
            Some(old.as_str()),
            "a failover was decided with no instance reachable: {:?}",
            s.last_failover
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        writer.acknowledged() <= acknowledged_then + 1,
        "writes were acknowledged with the node lost ({processes:?}) for longer than the lease"
    );

    faults.restore_node();
    world.partitions().heal_node(NODE);
    let restored = Instant::now();
    writer.wait_for_more(20, Duration::from_secs(180)).await;
    println!(
        "node lost ({processes:?}) for {:?}; writes acknowledged again {:?} after it came back",
        restored - lost,
        restored.elapsed()
    );
    world.wait_replicating(CLUSTER, 3).await;
    let s = world.status(CLUSTER).await;
    let primaries = primaries(&s);
    assert_eq!(primaries.len(), 1, "{primaries:?}");
    println!(
        "primary before {old}, after {:?}; last failover {:?}",
        s.current_primary, s.last_failover
    );
    every_acknowledged_write_kept(&world, CLUSTER, writer).await;
    wait_for("the node Ready again", Duration::from_secs(60), || async {
        node_ready(&world).await
    })
    .await;
    world.shutdown().await;
}

async fn node_ready(world: &World) -> bool {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(world.client.clone());
    let Ok(node) = nodes.get(NODE).await else {
        return false;
    };
    node.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}
