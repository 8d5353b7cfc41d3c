//! The chosen standby dying during its promotion (R25, a case of the failure
//! matrix), on the full sandbox with real PostgreSQL, a writer running
//! through `-rw` throughout.
//!
//! The primary is frozen (every process of its pod stopped), and the
//! standby the operator chooses is frozen the moment the decision reaches
//! this test's watch, before or while it promotes. The operator must not
//! wait on it for ever nor promote two: it abandons the chosen standby
//! once `promotionTimeoutSeconds` ran out (or, had it been seen serving
//! before it froze, fails over from it in turn), and promotes the third
//! instance, which takes the primary lease over from whichever held it
//! last. No acknowledged write is lost (`ANY 2`: every commit is on both
//! standbys, so the third holds them all), the status names what
//! happened, and once thawed both frozen instances rejoin as standbys
//! without accepting a write.

mod common;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tusk_api::v1alpha1::PostgresCluster;

use common::{NS, World, rejoins_without_accepting_a_write, wait_for};

const CLUSTER: &str = "relay";
/// The shortest timeout the API allows.
const PROMOTION_TIMEOUT_SECONDS: u64 = 5;

/// Waits for the first status whose target primary is not `old`.
async fn chosen_instead_of(world: &World, old: &str) -> String {
    let clusters: Api<PostgresCluster> = Api::namespaced(world.client.clone(), NS);
    let config = watcher::Config::default().fields(&format!("metadata.name={CLUSTER}"));
    let mut changes = watcher(clusters, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let chosen = async {
        while let Some(cluster) = changes.next().await {
            let target = cluster
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.target_primary);
            if let Some(target) = target.filter(|t| t != old) {
                return target;
            }
        }
        panic!("the watch of {CLUSTER} ended");
    };
    tokio::time::timeout(Duration::from_secs(60), chosen)
        .await
        .expect("a standby chosen within 60 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_that_dies_while_it_is_promoted_is_given_up_for_the_other() {
    let world = World::start().await;
    let mut spec = common::durable_cluster(0);
    spec["replication"]["synchronous"]["number"] = json!(2);
    spec["failover"]["promotionTimeoutSeconds"] = json!(PROMOTION_TIMEOUT_SECONDS);
    world.create_cluster(CLUSTER, spec).await;
    world.wait_replicating(CLUSTER, 3).await;
    let writer = world.ledger_writer(CLUSTER, Duration::from_secs(1)).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let status = world.status(CLUSTER).await;
    let old = status.current_primary.expect("a primary");
    let faults = world.node.as_ref().expect("node").faults();

    let frozen = Instant::now();
    faults
        .freeze(NS, &old, "postgres")
        .expect("freeze the primary");
    let chosen = chosen_instead_of(&world, &old).await;
    faults
        .freeze(NS, &chosen, "postgres")
        .expect("freeze the chosen standby");
    println!(
        "{old} frozen; {chosen} chosen and frozen after {:?}",
        frozen.elapsed()
    );
    let third = status
        .instances
        .iter()
        .map(|i| i.name.clone())
        .find(|name| *name != old && *name != chosen)
        .expect("a third instance");

    wait_for(
        "the third instance serving",
        Duration::from_secs(90),
        || async { world.status(CLUSTER).await.current_primary.as_deref() == Some(third.as_str()) },
    )
    .await;
    let serving = frozen.elapsed();
    let s = world.status(CLUSTER).await;
    let record = s.last_failover.clone().expect("a failover on record");
    println!(
        "{third} serving {serving:?} after the freeze; last failover {} -> {}, abandoned {:?}",
        record.from, record.to, record.abandoned
    );
    assert_eq!(record.to, third, "{s:#?}");
    assert!(
        record.abandoned.contains(&chosen) || record.from == chosen,
        "the status says what became of {chosen}: {s:#?}"
    );
    assert!(
        serving >= Duration::from_secs(PROMOTION_TIMEOUT_SECONDS) || record.from == chosen,
        "{chosen} given up before its promotion timeout: {serving:?}"
    );
    assert_eq!(record.lsn_gap_bytes, 0, "every commit is on {third}");
    writer.wait_for_more(20, Duration::from_secs(60)).await;

    faults.thaw(NS, &chosen, "postgres").expect("thaw");
    faults.thaw(NS, &old, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &chosen).await;
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    assert_eq!(
        world.status(CLUSTER).await.current_primary.as_deref(),
        Some(third.as_str()),
        "the thawed instances took nothing back"
    );
    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    println!(
        "{} writes acknowledged, {stored} rows stored, {} missing",
        acknowledged.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    world.shutdown().await;
}
