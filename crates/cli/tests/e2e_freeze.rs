//! A frozen primary (R25, a case of the failure matrix), on the full sandbox
//! with real PostgreSQL, a writer running through `-rw` throughout.
//!
//! 1. Every process of the primary's pod stopped (SIGSTOP), as a hung
//!    node: a standby is promoted, and once thawed the former primary
//!    rejoins as a standby without accepting a write.
//! 2. Every process but PostgreSQL's backends stopped (the postmaster,
//!    the instance manager and its fence watchdog), the backends
//!    (walsenders, client backends) running on: the manager can
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
//! Every case runs on both runtimes (host processes, and Docker
//! containers, where the signals reach the containers' processes from the
//! host as a node's kernel would).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tusk_api::lsn::Lsn;
use tusk_api::v1alpha1::BlockedFailover;

use common::checks::every_acknowledged_write_kept;
use common::runtime::Runtime;
use common::story::{Timeline, instance_report};
use common::writer::{DIRECT_IDS, direct_writer};
use common::{NS, World, pod_ip, rejoins_without_accepting_a_write};

/// Ids written directly to each standby (refused until one is promoted)
/// start here, one range per standby.
const PROBE_IDS: i64 = 2_000_000_000;

/// Waits until an instance other than `old` is the primary and serves;
/// returns its name and when that was seen.
async fn promoted_instead_of(world: &World, cluster: &str, old: &str) -> (String, Instant) {
    match failover_of(world, cluster, old, false).await {
        Ok(promoted) => promoted,
        Err(blocked) => unreachable!("not stopping at a block: {blocked:?}"),
    }
}

/// As [`promoted_instead_of`], but when `stop_at_block` returns the
/// failover the declared durability blocked, as soon as it is on record.
async fn failover_of(
    world: &World,
    cluster: &str,
    old: &str,
    stop_at_block: bool,
) -> Result<(String, Instant), BlockedFailover> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut timeline = Timeline::new();
    loop {
        let s = world.status(cluster).await;
        if let Some(new) = s.current_primary.as_ref().filter(|p| *p != old)
            && s.current_primary == s.target_primary
        {
            return Ok((new.clone(), Instant::now()));
        }
        if let Some(blocked) = s
            .failover
            .as_ref()
            .and_then(|f| f.blocked.clone())
            .filter(|_| stop_at_block)
        {
            return Err(blocked);
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

/// The WAL position the standby `name` reports it received.
async fn received(world: &World, name: &str) -> Lsn {
    let report = instance_report(world, name)
        .await
        .unwrap_or_else(|why| panic!("{name} reports nothing: {why}"));
    report
        .received_lsn
        .as_deref()
        .and_then(|lsn| lsn.parse().ok())
        .unwrap_or_else(|| panic!("{name} reports no received position: {report:?}"))
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
    common::writer::Writer,
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
    writer: common::writer::Writer,
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
    frozen_primary(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_frozen_primary_is_replaced_and_rejoins_without_accepting_a_write() {
    frozen_primary(Runtime::Docker).await;
}

async fn frozen_primary(runtime: Runtime) {
    const CLUSTER: &str = "frozen";
    let world = World::start_on(runtime).await;
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
    every_acknowledged_write_kept(&world, CLUSTER, writer).await;
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_postmaster_and_manager_hang_acknowledges_nothing_once_a_standby_is_promoted()
 {
    hung_postmaster_and_manager(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_primary_whose_postmaster_and_manager_hang_acknowledges_nothing_once_a_standby_is_promoted()
 {
    hung_postmaster_and_manager(Runtime::Docker).await;
}

async fn hung_postmaster_and_manager(runtime: Runtime) {
    const CLUSTER: &str = "hung";
    let world = World::start_on(runtime).await;
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
    // postmaster, the instance manager and its fence watchdog keep their
    // command lines. With the watchdog stopped as well, only the standbys'
    // withheld confirmations keep the old primary from acknowledging
    // (e2e_fencing leaves the watchdog running, with asynchronous
    // replication).
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

/// A cluster with writers (see [`with_direct_writer`]) and the standby
/// to cut off from the API server, for the cases where a standby is blind.
struct BlindCase {
    world: World,
    cluster: &'static str,
    writer: common::writer::Writer,
    old: String,
    blind: String,
    stop: Arc<AtomicBool>,
    direct: tokio::task::JoinHandle<Vec<(i64, Instant)>>,
}

impl BlindCase {
    async fn start(cluster: &'static str, runtime: Runtime) -> Self {
        let world = World::start_on(runtime).await;
        let (writer, old, stop, direct) = with_direct_writer(&world, cluster).await;
        let blind = world
            .status(cluster)
            .await
            .instances
            .into_iter()
            .map(|i| i.name)
            .find(|name| *name != old)
            .expect("a standby");
        writer.wait_for_more(10, Duration::from_secs(30)).await;
        BlindCase {
            world,
            cluster,
            writer,
            old,
            blind,
            stop,
            direct,
        }
    }

    fn faults(&self) -> tusk_sandbox::node::kubelet::KubeletFaults {
        self.world.node.as_ref().expect("node").faults()
    }

    /// Stops the old primary's postmaster and manager, its backends
    /// running on; returns when.
    fn hang_primary(&self) -> Instant {
        let hung = Instant::now();
        let frozen = self
            .faults()
            .freeze_where(NS, &self.old, "postgres", |line| {
                !line.starts_with("postgres: ")
            })
            .expect("freeze");
        assert!(
            frozen >= 2,
            "the instance manager and the postmaster: {frozen}"
        );
        hung
    }

    /// Once `new` serves (seen at `serving`): the old primary's direct
    /// client, kept writing a while, had nothing acknowledged after that;
    /// healed and thawed, the old primary rejoins and every standby
    /// confirms again; every acknowledged write is on the final primary.
    async fn finish(self, new: &str, hung: Instant, serving: Instant) {
        let (world, cluster, writer, old) = (self.world, self.cluster, self.writer, self.old);
        writer.wait_for_more(20, Duration::from_secs(60)).await;
        // The direct client goes on a while: a standby still confirming the
        // old primary's commits would let them through now.
        tokio::time::sleep(Duration::from_secs(3)).await;
        self.stop.store(true, Ordering::SeqCst);
        let on_old = self.direct.await.expect("direct writer");
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
        world.partitions().heal_pod(NS, &self.blind);
        let faults = world.node.as_ref().expect("node").faults();
        faults.thaw(NS, &old, "postgres").expect("thaw");
        rejoins_without_accepting_a_write(&world, cluster, &old).await;
        // The standby that stopped streaming for want of a live lease
        // streams again from the new primary, and confirms its commits.
        world.wait_replicating(cluster, 3).await;
        nothing_lost(&world, cluster, writer, &old, &on_old, &[]).await;
        assert!(
            after.is_empty(),
            "{old} acknowledged {after:?} after {new} served"
        );
        world.shutdown().await;
    }
}

/// Heals the cut of `blind` once a failover is blocked because it holds
/// commits the best reachable standby lacks (checked: a block for any
/// other reason fails), and waits for the promotion that follows.
async fn healed_then_promoted(case: &BlindCase, blocked: &BlockedFailover) -> (String, Instant) {
    let (world, blind) = (&case.world, &case.blind);
    let (cut_off, candidate) = (
        received(world, blind).await,
        received(world, &blocked.to).await,
    );
    assert!(
        cut_off > candidate,
        "blocked although {blind} (cut off, received {cut_off}) holds nothing {} (received {candidate}) lacks: {blocked:?}",
        blocked.to
    );
    println!(
        "failover blocked: {blind}, cut off, received {cut_off}, {} only {candidate}; healing the cut",
        blocked.to
    );
    world.partitions().heal_pod(NS, blind);
    promoted_instead_of(world, case.cluster, &case.old).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_cut_off_from_the_api_server_stops_confirming_a_hung_primarys_commits() {
    blind_standby(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_standby_cut_off_from_the_api_server_stops_confirming_a_hung_primarys_commits()
{
    blind_standby(Runtime::Docker).await;
}

async fn blind_standby(runtime: Runtime) {
    let case = BlindCase::start("blind", runtime).await;
    let (old, blind) = (case.old.clone(), case.blind.clone());
    case.world.partitions().cut_pod(NS, &blind);
    let hung = case.hang_primary();
    // Both standbys stop confirming once the lease lapses in their view.
    // The one that stopped last may hold commits the other lacks: when
    // that is the one cut off, it cannot be chosen and the failover is
    // blocked (dataDurability: required) until it reaches the API server
    // again; it is then the one promoted.
    let (new, serving) = match failover_of(&case.world, case.cluster, &old, true).await {
        Ok(promoted) => promoted,
        Err(blocked) => healed_then_promoted(&case, &blocked).await,
    };
    println!(
        "{old} hung, {blind} cut off from the API server: {new} serving {:?} after",
        serving - hung
    );
    case.finish(&new, hung, serving).await;
}

/// As above, with the cut-off standby's manager stalled for a while around
/// the hang: its PostgreSQL streams on and confirms the old primary's
/// commits after the other standby stopped, so only it holds them all.
/// The failover waits (blocked) until it reaches the API server again,
/// then promotes it, losing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_would_lose_what_only_a_cut_off_standby_holds_waits_for_it() {
    stalled_blind_standby(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_failover_that_would_lose_what_only_a_cut_off_standby_holds_waits_for_it() {
    stalled_blind_standby(Runtime::Docker).await;
}

async fn stalled_blind_standby(runtime: Runtime) {
    let case = BlindCase::start("behind", runtime).await;
    let (old, blind) = (case.old.clone(), case.blind.clone());
    case.world.partitions().cut_pod(NS, &blind);
    let stalled = case
        .faults()
        .freeze_where(NS, &blind, "postgres", |line| {
            line.ends_with("tusk instance run")
        })
        .expect("stall the manager");
    assert_eq!(stalled, 1, "the cut-off standby's instance manager");
    let hung = case.hang_primary();
    // The other standby stops confirming after the lease's fence time
    // (1.2 s for delaySeconds 2); this one's PostgreSQL goes on.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    case.faults().thaw(NS, &blind, "postgres").expect("thaw");
    let blocked = match failover_of(&case.world, case.cluster, &old, true).await {
        Err(blocked) => blocked,
        Ok((new, _)) => panic!("{new} promoted although only {blind} holds every commit"),
    };
    let (new, serving) = healed_then_promoted(&case, &blocked).await;
    assert_eq!(new, blind, "the standby holding every acknowledged commit");
    println!(
        "{old} hung, {blind} stalled and cut off: blocked, then {new} serving {:?} after the hang",
        serving - hung
    );
    case.finish(&new, hung, serving).await;
}
