//! High availability end to end (R25), on the full sandbox with real
//! PostgreSQL: with synchronous replication and `dataDurability:
//! required`, a writer records every acknowledged commit through `-rw`
//! while the cluster switches over with `tusk promote`, fails over twice
//! from a primary whose processes are SIGKILLed again and again, and once
//! from a frozen one. No
//! acknowledged row may be missing, the former primary must never accept a
//! write, and it must rejoin as a standby without help. On both runtimes.

mod common;

use std::time::{Duration, Instant};

use common::runtime::Runtime;
use common::writer::WRITE_TIMEOUT;
use common::{NS, World, pod_ip, rejoins_without_accepting_a_write, wait_for};
use k8s_openapi::api::core::v1::Endpoints;
use kube::api::Api;

const CLUSTER: &str = "ha";

/// Kills the primary's processes until the operator has chosen another
/// instance; returns (former, new) primary.
async fn fail_over_by_killing_the_primary(world: &World) -> (String, String) {
    world.wait_replicating(CLUSTER, 3).await;
    let old = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let faults = world.node.as_ref().expect("node").faults();
    let started = Instant::now();
    let new = loop {
        // Not running between restarts: nothing to kill then.
        let _ = faults.kill(NS, &old, "postgres");
        let s = world.status(CLUSTER).await;
        if let Some(target) = s.target_primary.as_ref().filter(|t| **t != old) {
            break target.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no failover from {old}: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    println!(
        "failover {old} -> {new} chosen after {:?}",
        started.elapsed()
    );
    let record = world.status(CLUSTER).await.last_failover.expect("recorded");
    assert_eq!(
        (record.from.as_str(), record.to.as_str()),
        (old.as_str(), new.as_str())
    );
    assert_eq!(record.reason, "Failover");
    assert_eq!(
        record.lsn_gap_bytes, 0,
        "a synchronous standby loses nothing"
    );
    assert!(record.recovery_point.is_some(), "{record:?}");
    wait_for(
        "the new primary serving",
        Duration::from_secs(60),
        || async { world.status(CLUSTER).await.current_primary.as_deref() == Some(new.as_str()) },
    )
    .await;
    rejoins_without_accepting_a_write(world, CLUSTER, &old).await;
    (old, new)
}

async fn rw_endpoints(world: &World) -> Vec<String> {
    let endpoints: Api<Endpoints> = Api::namespaced(world.client.clone(), NS);
    let Ok(found) = endpoints.get(&format!("{CLUSTER}-rw")).await else {
        return Vec::new();
    };
    found
        .subsets
        .unwrap_or_default()
        .into_iter()
        .flat_map(|s| s.addresses.unwrap_or_default())
        .map(|a| a.ip)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_write_is_lost_in_a_switchover_or_two_failovers() {
    switchover_and_failovers(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_no_acknowledged_write_is_lost_in_a_switchover_or_two_failovers() {
    switchover_and_failovers(Runtime::Docker).await;
}

async fn switchover_and_failovers(runtime: Runtime) {
    let world = World::start_on(runtime).await;
    world
        .create_cluster(CLUSTER, common::durable_cluster(3))
        .await;
    world.wait_replicating(CLUSTER, 3).await;
    let writer = world.ledger_writer(CLUSTER, WRITE_TIMEOUT).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;

    // A planned switchover under write load, asked for with `tusk promote`.
    let before = world.status(CLUSTER).await;
    let old = before.current_primary.clone().expect("a primary");
    let to = before
        .instances
        .iter()
        .find(|i| i.role == "replica")
        .map(|i| i.name.clone())
        .expect("a standby");
    let started = Instant::now();
    let switchover_started = started;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args(["promote", CLUSTER, &to, "--wait", "120"])
        .env("KUBECONFIG", world.kubeconfig())
        .output()
        .expect("tusk promote runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(&format!("{to} is the primary")), "{stdout}");
    println!("switchover {old} -> {to}: {:?}", started.elapsed());
    let record = world.status(CLUSTER).await.last_failover.expect("recorded");
    assert_eq!(
        (
            record.reason.as_str(),
            record.from.as_str(),
            record.to.as_str()
        ),
        ("Switchover", old.as_str(), to.as_str())
    );
    let cluster = world.clusters().get(CLUSTER).await.expect("cluster");
    assert!(
        !cluster
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("tusk.dev/promote"),
        "the request is removed once acted on"
    );
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    println!(
        "switchover: longest time without an acknowledged write {:?}",
        writer.longest_pause_since(switchover_started)
    );

    // Two failovers in a row.
    for round in 1..=2 {
        let killed = Instant::now();
        let (_, new) = fail_over_by_killing_the_primary(&world).await;
        writer.wait_for_more(20, Duration::from_secs(60)).await;
        println!(
            "failover {round}: longest time without an acknowledged write {:?}",
            writer.longest_pause_since(killed)
        );
        let new_ip = pod_ip(&world, &new).await.expect("the new primary's IP");
        assert_eq!(
            rw_endpoints(&world).await,
            [new_ip],
            "-rw selects only the new primary"
        );
    }

    // A primary frozen instead of killed (every process stopped, as a hung
    // node): another instance is promoted, and once thawed the former
    // primary acknowledges no write (its synchronous standbys follow the
    // new primary) before its manager stops it, then it rejoins.
    world.wait_replicating(CLUSTER, 3).await;
    let old = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let faults = world.node.as_ref().expect("node").faults();
    let frozen = Instant::now();
    faults.freeze(NS, &old, "postgres").expect("freeze");
    wait_for(
        "another instance promoted",
        Duration::from_secs(90),
        || async {
            let s = world.status(CLUSTER).await;
            s.current_primary.as_ref().is_some_and(|p| *p != old)
                && s.current_primary == s.target_primary
        },
    )
    .await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    println!(
        "frozen primary: longest time without an acknowledged write {:?}",
        writer.longest_pause_since(frozen)
    );
    faults.thaw(NS, &old, "postgres").expect("thaw");
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;

    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    println!(
        "{} acknowledged commits, {} rows stored, {} missing",
        acknowledged.len(),
        stored,
        missing.len()
    );
    assert!(acknowledged.len() >= 80, "{}", acknowledged.len());
    assert!(missing.is_empty(), "acknowledged rows lost: {missing:?}");
    world.shutdown().await;
}
