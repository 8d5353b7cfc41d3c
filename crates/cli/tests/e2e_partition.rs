//! A primary cut off from the API server while its clients still reach it
//! (R25, lease-held primacy), on the full sandbox with real PostgreSQL.
//!
//! A writer goes through `-rw` (its established connection stays with the
//! old primary after the endpoint moves, as kube-proxy keeps it) and a
//! second client writes to the primary directly. The primary's instance
//! manager cannot renew its lease, so it stops PostgreSQL; the operator
//! promotes a standby only after that. Every acknowledged write, through
//! either client, must be on the new primary, the old primary must
//! acknowledge nothing once the new one serves, and once healed it must
//! rejoin as a standby. It runs on both runtimes: with host processes,
//! and with Docker containers, where the pods' traffic crosses a real
//! bridge and the Service proxy is the only path clients share.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::runtime::Runtime;
use common::writer::{DIRECT_IDS, direct_writer};
use common::{NS, World, pod_ip, rejoins_without_accepting_a_write, wait_for};

const CLUSTER: &str = "cut";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_cut_off_from_the_api_server_stops_before_a_standby_is_promoted() {
    cut_off_from_the_api_server(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_primary_cut_off_from_the_api_server_stops_before_a_standby_is_promoted() {
    cut_off_from_the_api_server(Runtime::Docker).await;
}

async fn cut_off_from_the_api_server(runtime: Runtime) {
    let world = World::start_on(runtime).await;
    let (writer, old) = world.durable_cluster_with_writer(CLUSTER, 2).await;
    let old_ip = pod_ip(&world, &old).await.expect("its IP");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let direct = direct_writer(
        world.conninfo_at(&old_ip, CLUSTER).await,
        DIRECT_IDS,
        stop.clone(),
    );

    world.partitions().cut_pod(NS, &old);
    let cut = Instant::now();
    let new = Arc::new(Mutex::new(None::<(String, Instant)>));
    wait_for("a standby promoted", Duration::from_secs(90), || async {
        let s = world.status(CLUSTER).await;
        match s.current_primary.filter(|p| *p != old) {
            Some(p) => {
                new.lock().expect("new").get_or_insert((p, Instant::now()));
                true
            }
            None => false,
        }
    })
    .await;
    let (new, serving) = new.lock().expect("new").clone().expect("promoted");
    println!(
        "failover {old} -> {new} seen {:?} after the cut",
        serving - cut
    );
    let record = world.status(CLUSTER).await.last_failover.expect("recorded");
    assert_eq!(
        (record.from.as_str(), record.to.as_str()),
        (old.as_str(), new.as_str())
    );
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    // The old primary, still cut off, stays stopped: its manager cannot
    // hold the lease nor learn the new target.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let direct = direct.await.expect("direct writer");
    let last_direct = direct.last().map(|(_, at)| *at);
    println!(
        "{} direct writes on the old primary acknowledged, the last {:?} after the cut",
        direct.len(),
        last_direct.map(|at| at.saturating_duration_since(cut))
    );
    assert!(!direct.is_empty(), "the direct client wrote before the cut");
    assert!(
        last_direct.is_some_and(|at| at < serving),
        "the old primary acknowledged a write after {new} was serving"
    );

    world.partitions().heal_pod(NS, &old);
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    let acknowledged = writer.finish().await;
    let mut all: Vec<i64> = acknowledged.clone();
    all.extend(direct.iter().map(|(id, _)| *id));
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &all).await;
    println!(
        "{} writes acknowledged ({} through -rw, {} direct), {stored} rows stored",
        all.len(),
        acknowledged.len(),
        direct.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    world.shutdown().await;
}
