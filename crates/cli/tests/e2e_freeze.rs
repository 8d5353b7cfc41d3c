//! A frozen primary (R25, issue 14's failure matrix), on the full sandbox
//! with real PostgreSQL, a writer running through `-rw` throughout.
//!
//! 1. Every process of the primary's pod stopped (SIGSTOP), as a hung
//!    node: a standby is promoted, and once thawed the former primary
//!    rejoins as a standby without accepting a write.
//! 2. Only the postmaster and the instance manager stopped, PostgreSQL's
//!    backends (walsenders, client backends) running on: the manager can
//!    neither renew the primary lease nor stop PostgreSQL, while the old
//!    primary's established connections and replication stay alive. A
//!    client holding a connection to the old primary's pod keeps writing;
//!    every write either client saw acknowledged must be on the final
//!    primary: one the old primary acknowledged once a standby was
//!    promoted would be missing there (two primaries acknowledging).
//! 3. As 2, with one standby cut off from the API server at the moment of
//!    the hang: it can learn neither the new primary nor the state of the
//!    lease, and its WAL receiver is still connected to the old primary's
//!    walsender. It must stop confirming the old primary's commits all the
//!    same (it streams only from a holder of a live lease): otherwise the
//!    old primary's direct client commits on it after the other standby
//!    was promoted, and those acknowledged writes are lost.
//!
//! Each case prints the longest time without an acknowledged write.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{
    DIRECT_IDS, NS, Timeline, World, direct_writer, pod_ip, rejoins_without_accepting_a_write,
};

/// Ids written directly to each standby (refused until one is promoted)
/// start here, one range per standby.
const PROBE_IDS: i64 = 2_000_000_000;

/// Waits until an instance other than `old` is the primary and serves;
/// returns its name and when that was seen.
async fn promoted_instead_of(world: &World, cluster: &str, old: &str) -> (String, Instant) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut timeline = Timeline::new();
    loop {
        let s = world.status(cluster).await;
        if let Some(new) = s.current_primary.as_ref().filter(|p| *p != old)
            && s.current_primary == s.target_primary
        {
            return (new.clone(), Instant::now());
        }
        timeline.sample(world, &s).await;
        if Instant::now() >= deadline {
            let story = world.story(cluster).await;
            panic!(
                "no instance promoted instead of {old}; what changed meanwhile:\n{}\n{story}",
                timeline.text()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The failover is on record, from `old` to `new`, losing nothing.
async fn recorded(world: &World, cluster: &str, old: &str, new: &str) {
    let record = world.status(cluster).await.last_failover.expect("recorded");
    assert_eq!(
        (
            record.reason.as_str(),
            record.from.as_str(),
            record.to.as_str()
        ),
        ("Failover", old, new),
        "{record:?}"
    );
    assert_eq!(
        record.lsn_gap_bytes, 0,
        "a synchronous standby loses nothing"
    );
    println!(
        "recorded: {} {old} -> {new}, {:?} s from the failure to serving",
        record.reason, record.duration_seconds
    );
}

/// A durable cluster with a writer through `-rw`, and a second client
/// writing to its primary directly (ids from [`DIRECT_IDS`]) until `stop`.
async fn with_direct_writer(
    world: &World,
    cluster: &str,
) -> (
    common::Writer,
    String,
    Arc<AtomicBool>,
    tokio::task::JoinHandle<Vec<(i64, Instant)>>,
) {
    let (writer, old) = world.durable_cluster_with_writer(cluster, 2).await;
    let stop = Arc::new(AtomicBool::new(false));
    let old_ip = pod_ip(world, &old).await.expect("its IP");
    let direct = direct_writer(
        world.conninfo_at(&old_ip, cluster).await,
        DIRECT_IDS,
        stop.clone(),
    );
    (writer, old, stop, direct)
}

/// Every write acknowledged through `-rw` (`writer`, stopped here), by
/// the old primary directly (`on_old`, which must hold some) and by the
/// new one directly (`on_new`) is on the final primary.
async fn nothing_lost(
    world: &World,
    cluster: &str,
    writer: common::Writer,
    old: &str,
    on_old: &[(i64, Instant)],
    on_new: &[(i64, Instant)],
) {
    let through_rw = writer.finish().await;
    let mut all = through_rw.clone();
    all.extend(on_old.iter().chain(on_new).map(|(id, _)| *id));
    let (missing, stored) = world.missing_from_ledger(cluster, &all).await;
    println!(
        "{} writes acknowledged ({} through -rw, {} on {old} directly, {} on the new primary directly), {stored} rows stored",
        all.len(),
        through_rw.len(),
        on_old.len(),
        on_new.len()
    );
    assert!(
        !on_old.is_empty(),
        "the direct client wrote before the hang"
    );
    assert!(
        missing.is_empty(),
        "acknowledged writes lost (ids from {DIRECT_IDS} were acknowledged by {old} directly): {missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_primary_is_replaced_and_rejoins_without_accepting_a_write() {
    const CLUSTER: &str = "frozen";
    let world = World::start().await;
    let (writer, old) = world.durable_cluster_with_writer(CLUSTER, 2).await;
    let faults = world.node.as_ref().expect("node").faults();

    let frozen = Instant::now();
    faults.freeze(NS, &old, "postgres").expect("freeze");
    let (new, serving) = promoted_instead_of(&world, CLUSTER, &old).await;
    println!("{old} frozen: {new} serving {:?} after", serving - frozen);
    recorded(&world, CLUSTER, &old, &new).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    eprintln!(
        "whole pod frozen: longest time without an acknowledged write {:?}",
        writer.longest_pause_since(frozen)
    );

    faults.thaw(NS, &old, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    println!(
        "{} writes acknowledged, {stored} rows stored",
        acknowledged.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_postmaster_and_manager_hang_acknowledges_nothing_once_a_standby_is_promoted()
 {
    const CLUSTER: &str = "hung";
    let world = World::start().await;
    let (writer, old, stop, direct) = with_direct_writer(&world, CLUSTER).await;
    let faults = world.node.as_ref().expect("node").faults();
    // A writer on each standby, refused until it is promoted: the first
    // write the new primary acknowledges, and when.
    let mut probes = Vec::new();
    let standbys: Vec<String> = world
        .status(CLUSTER)
        .await
        .instances
        .into_iter()
        .map(|i| i.name)
        .filter(|name| *name != old)
        .collect();
    for (range, standby) in (0_i64..).zip(&standbys) {
        let ip = pod_ip(&world, standby).await.expect("its IP");
        let first = PROBE_IDS + range * 100_000_000;
        let conninfo = world.conninfo_at(&ip, CLUSTER).await;
        probes.push((
            standby.clone(),
            direct_writer(conninfo, first, stop.clone()),
        ));
    }
    writer.wait_for_more(10, Duration::from_secs(30)).await;

    // PostgreSQL's children retitle themselves "postgres: ..."; the
    // postmaster and the instance manager keep their command lines.
    let hung = Instant::now();
    let frozen = faults
        .freeze_where(NS, &old, "postgres", |line| !line.starts_with("postgres: "))
        .expect("freeze");
    assert!(
        frozen >= 2,
        "the instance manager and the postmaster: {frozen}"
    );
    let (new, serving) = promoted_instead_of(&world, CLUSTER, &old).await;
    println!("{old} hung: {new} serving {:?} after", serving - hung);
    recorded(&world, CLUSTER, &old, &new).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    eprintln!(
        "postmaster and manager hung: longest time without an acknowledged write {:?}",
        writer.longest_pause_since(hung)
    );
    stop.store(true, Ordering::SeqCst);
    let on_old = direct.await.expect("direct writer");
    let mut on_new = Vec::new();
    for (standby, probe) in probes {
        let acked = probe.await.expect("probe writer");
        if standby == new {
            on_new = acked;
        } else {
            assert!(acked.is_empty(), "{standby}, not promoted, took a write");
        }
    }
    let first_on_new = on_new
        .first()
        .map(|(_, at)| *at)
        .expect("a write on the new primary");
    let after: Vec<i64> = on_old
        .iter()
        .filter(|(_, at)| *at > first_on_new)
        .map(|(id, _)| *id)
        .collect();
    println!(
        "{} writes acknowledged by {old} directly, the last {:?} after the hang; \
         {new} acknowledged its first {:?} after the hang; \
         {} acknowledged by {old} after that: {after:?}",
        on_old.len(),
        on_old
            .last()
            .map(|(_, at)| at.saturating_duration_since(hung)),
        first_on_new - hung,
        after.len()
    );

    faults.thaw(NS, &old, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    nothing_lost(&world, CLUSTER, writer, &old, &on_old, &on_new).await;
    assert!(
        after.is_empty(),
        "{old} acknowledged {after:?} after {new} acknowledged a write"
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_cut_off_from_the_api_server_stops_confirming_a_hung_primarys_commits() {
    const CLUSTER: &str = "blind";
    let world = World::start().await;
    let (writer, old, stop, direct) = with_direct_writer(&world, CLUSTER).await;
    let faults = world.node.as_ref().expect("node").faults();
    let blind = world
        .status(CLUSTER)
        .await
        .instances
        .into_iter()
        .map(|i| i.name)
        .find(|name| *name != old)
        .expect("a standby");
    writer.wait_for_more(10, Duration::from_secs(30)).await;

    world.partitions().cut_pod(NS, &blind);
    let hung = Instant::now();
    let frozen = faults
        .freeze_where(NS, &old, "postgres", |line| !line.starts_with("postgres: "))
        .expect("freeze");
    assert!(
        frozen >= 2,
        "the instance manager and the postmaster: {frozen}"
    );
    let (new, serving) = promoted_instead_of(&world, CLUSTER, &old).await;
    println!(
        "{old} hung, {blind} cut off from the API server: {new} serving {:?} after",
        serving - hung
    );
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    // The direct client goes on a while: a standby still confirming the
    // old primary's commits would let them through now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    let on_old = direct.await.expect("direct writer");
    let after: Vec<i64> = on_old
        .iter()
        .filter(|(_, at)| *at > serving)
        .map(|(id, _)| *id)
        .collect();
    println!(
        "{} writes acknowledged by {old} directly, the last {:?} after the hang; {} after {new} served",
        on_old.len(),
        on_old
            .last()
            .map(|(_, at)| at.saturating_duration_since(hung)),
        after.len()
    );

    world.partitions().heal_pod(NS, &blind);
    faults.thaw(NS, &old, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    // The standby that stopped streaming for want of a live lease streams
    // again from the new primary, and confirms its commits.
    world.wait_replicating(CLUSTER, 3).await;
    nothing_lost(&world, CLUSTER, writer, &old, &on_old, &[]).await;
    assert!(
        after.is_empty(),
        "{old} acknowledged {after:?} after {new} served"
    );
    world.shutdown().await;
}
