//! Recovery time of an automated failover (R25, R33), measured on the full
//! sandbox with real PostgreSQL: figures printed, nothing asserted.
//!
//! A three-instance cluster with `ANY 1` synchronous replication and
//! `dataDurability: required` takes writes through `-rw` (one autocommit
//! insert at a time, every acknowledgement timed, a connection attempt or
//! a write given up after 1 s). Each repetition strikes the primary
//! ([`fault`]): by default it freezes its processes (SIGSTOP of the whole
//! tree: a hung node, which is what a failover is for); `hang` freezes
//! only its postmaster and instance manager, its backends running on;
//! `kill` kills its processes again and again until another instance is
//! chosen (a killed one is otherwise restarted in place by the kubelet);
//! `cut` cuts its pod off from the API server, its clients still reaching
//! it.
//! Then it measures:
//! - RTO: the longest time without an acknowledged write, from the last
//!   one before the fault to the first one after the failover;
//! - follow: from the freeze until the other standby streams from the new
//!   primary;
//! - rejoin: from thawing the former primary (or the last kill) until it
//!   is a ready standby;
//! - the steps between ([`timeline`]): when the old primary's lease was
//!   last renewed, when `-rw` stopped routing to it, when the new primary
//!   was chosen, took the lease, was seen serving and routed to, and when
//!   the client's first write after the freeze was acknowledged.
//!
//! ```sh
//! cargo bench -p tusk --bench failover -- [REPETITIONS] [DELAY_SECONDS] [hang|kill|cut]
//! ```

#[path = "../../tests/common/mod.rs"]
mod common;
mod fault;
mod timeline;

use fault::Fault;

use std::time::{Duration, Instant};

use common::writer::Writer;
use common::{NS, World, wait_for};

const CLUSTER: &str = "rto";

struct Repetition {
    rto: Duration,
    follow: Duration,
    rejoin: Duration,
    decision: f64,
    steps: timeline::Steps,
}

fn summary(name: &str, mut values: Vec<f64>) {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let max = values[values.len() - 1];
    let min = values[0];
    println!("{name:<8} median {median:6.2} s   min {min:6.2} s   max {max:6.2} s");
}

async fn repetition(
    world: &World,
    writer: &Writer,
    timeline: &timeline::Timeline,
    fault: Fault,
) -> Repetition {
    world.wait_replicating(CLUSTER, 3).await;
    writer.wait_for_more(10, Duration::from_secs(60)).await;
    let status = world.status(CLUSTER).await;
    let old = status.current_primary.expect("a primary");
    let frozen = Instant::now();
    fault.strike(world, &old);
    let deadline = Instant::now() + Duration::from_secs(120);
    // Until another instance serves and the client has written on it (a
    // hung primary's backends may acknowledge writes after the fault,
    // until the standbys stop confirming them).
    let mut chosen = false;
    let mut serving: Option<Instant> = None;
    while serving.is_none_or(|at| writer.first_after(at).is_none()) {
        let s = world.status(CLUSTER).await;
        if fault.repeats() && !chosen {
            chosen = s.target_primary.is_some_and(|t| t != old);
            if !chosen {
                fault.strike(world, &old);
            }
        }
        if serving.is_none() && s.current_primary.is_some_and(|p| p != old) {
            serving = Some(Instant::now());
        }
        if Instant::now() > deadline {
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(world.client.clone(), NS);
            let list = pods.list(&Default::default()).await.expect("pods");
            for pod in list.items {
                println!(
                    "pod {:?} labels {:?} status {:?}",
                    pod.metadata.name,
                    pod.metadata.labels,
                    pod.status.map(|s| (s.conditions, s.container_statuses))
                );
            }
            let kept = std::env::temp_dir().join("tusk-failover-bench-pods");
            let _ = std::process::Command::new("cp")
                .arg("-r")
                .arg(world.dir.path().join("pods"))
                .arg(&kept)
                .status();
            println!("pod logs copied to {}", kept.display());
            panic!(
                "no write after freezing {old}: {:#?}",
                world.status(CLUSTER).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The longest pause from the last write acknowledged before the fault
    // to the first one on the new primary: the outage a client saw.
    let rto = writer.longest_pause_since(frozen);
    wait_for(
        "the other standby following",
        Duration::from_secs(120),
        || async {
            let s = world.status(CLUSTER).await;
            let Some(primary) = s.current_primary.clone().filter(|p| *p != old) else {
                return false;
            };
            s.instances
                .iter()
                .any(|i| i.name != old && i.name != primary && i.role == "replica" && i.ready)
        },
    )
    .await;
    let follow = frozen.elapsed();
    let new = world
        .status(CLUSTER)
        .await
        .current_primary
        .unwrap_or_default();
    let record = world.status(CLUSTER).await.last_failover.expect("recorded");
    let steps = timeline.steps(frozen, &old, &new, |at| writer.first_after(at));
    for (name, offset) in steps.named() {
        match offset {
            Some(offset) => println!("  {name:<22} {offset:+6.2} s"),
            None => println!("  {name:<22} not seen"),
        }
    }
    let thawed = Instant::now();
    fault.heal(world, &old);
    world.wait_replicating(CLUSTER, 3).await;
    let rejoin = thawed.elapsed();
    println!(
        "{old} -> {new}: RTO {:.2} s, other standby following after {:.2} s, former primary back after {:.2} s (recorded: {:.2} s to promotion, {} bytes possibly lost)",
        rto.as_secs_f64(),
        follow.as_secs_f64(),
        rejoin.as_secs_f64(),
        record.duration_seconds.unwrap_or_default(),
        record.lsn_gap_bytes
    );
    Repetition {
        rto,
        follow,
        rejoin,
        decision: record.duration_seconds.unwrap_or_default(),
        steps,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let numbers = common::bench_numbers();
    let repetitions = numbers.first().copied().unwrap_or(10).max(1);
    let delay = numbers.get(1).copied().unwrap_or(5);
    let fault = Fault::from_args();
    let world = World::start().await;
    world
        .create_cluster(CLUSTER, common::durable_cluster(delay))
        .await;
    world.wait_replicating(CLUSTER, 3).await;
    let timeline = timeline::Timeline::start(&world.client, NS, CLUSTER);
    // A client that gives up on a connection attempt or a write after a
    // second: with the common 5 s, a write or a connection stuck on the
    // frozen primary would hide any failover faster than that.
    let writer = world.ledger_writer(CLUSTER, Duration::from_secs(1)).await;
    println!(
        "{repetitions} failovers, delaySeconds {delay}, {}",
        fault.name()
    );
    let mut runs = Vec::new();
    for _ in 0..repetitions {
        runs.push(repetition(&world, &writer, &timeline, fault).await);
    }
    let acknowledged = writer.finish().await;
    timeline.stop();
    let (missing, _) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    let lost = missing.len();
    summary("RTO", runs.iter().map(|r| r.rto.as_secs_f64()).collect());
    summary("promote", runs.iter().map(|r| r.decision).collect());
    summary(
        "follow",
        runs.iter().map(|r| r.follow.as_secs_f64()).collect(),
    );
    summary(
        "rejoin",
        runs.iter().map(|r| r.rejoin.as_secs_f64()).collect(),
    );
    println!("steps, from the freeze:");
    let steps: Vec<timeline::Steps> = runs.into_iter().map(|r| r.steps).collect();
    timeline::summary(&steps);
    println!(
        "{} writes acknowledged, {lost} of them missing afterwards",
        acknowledged.len()
    );
    world.shutdown().await;
}
