//! Fencing that does not depend on the instance manager (the first
//! case of the failure matrix), on the full sandbox with real PostgreSQL
//! and asynchronous replication (`dataDurability: preferred`), where no
//! standby withholds a confirmation: only fencing stops the old primary.
//!
//! A session is opened directly on the primary's pod, as a client that
//! connected before the fault; a writer runs through `-rw` throughout, and
//! another directly on the primary's pod, keeping its connection.
//! Then the postmaster and the instance manager (the `tusk instance run`
//! process) are stopped with SIGSTOP; PostgreSQL's backends run on, and so
//! does the fence watchdog, a process of its own. A standby is promoted;
//! 3 s later the open session's `insert` must not be acknowledged by the
//! old primary: the watchdog killed every PostgreSQL process of the
//! instance when the lease was not renewed in time, before the operator
//! could take over. The direct writer's last acknowledgement comes less
//! than the lease's duration (1 s) after the hang: the operator cannot
//! have taken the lease over before that. Thawed, the old primary rejoins
//! as a standby without accepting a write.
//!
//! On both runtimes (host processes, and Docker containers where the
//! signals reach the containers' processes from the host).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::runtime::Runtime;
use common::story::Timeline;
use common::writer::{DIRECT_IDS, WRITE_TIMEOUT, direct_writer};
use common::{NS, World, pod_ip, rejoins_without_accepting_a_write, tls};

const CLUSTER: &str = "fence";

/// The primary lease's duration at `delaySeconds: 1`: no takeover comes
/// sooner after the holder's last renewal.
const LEASE: Duration = Duration::from_secs(1);

/// Three instances, asynchronous replication, replaced after 1 s.
fn asynchronous_cluster() -> serde_json::Value {
    serde_json::json!({"instances": 3,
           "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
           "storage": {"size": "1Gi"},
           "failover": {"delaySeconds": 1, "dataDurability": "preferred"}})
}

/// The instance manager (`tusk instance run`) and the postmaster (which
/// keeps its command line `.../postgres -D ...`; its children retitle
/// themselves `postgres: ...`). The fence watchdog (`tusk instance
/// watchdog`) is neither.
fn manager_or_postmaster(line: &str) -> bool {
    line.ends_with(" instance run") || line.contains("/postgres -D ")
}

/// Waits until an instance other than `old` is the primary and serves.
async fn promoted_instead_of(world: &World, old: &str) -> (String, Instant) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut timeline = Timeline::new();
    loop {
        let s = world.status(CLUSTER).await;
        if let Some(new) = s.current_primary.as_ref().filter(|p| *p != old)
            && s.current_primary == s.target_primary
        {
            return (new.clone(), Instant::now());
        }
        timeline.sample(world, &s).await;
        if Instant::now() >= deadline {
            let story = world.story(CLUSTER).await;
            panic!(
                "no instance promoted instead of {old}; what changed meanwhile:\n{}\n{story}",
                timeline.text()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A session opened directly on `host`, not through a Service.
async fn session_on(world: &World, host: &str) -> tokio_postgres::Client {
    let conninfo = world.conninfo_at(host, CLUSTER).await;
    let (client, connection) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_postgres::connect(&conninfo, tls::encrypted()),
    )
    .await
    .expect("connected in time")
    .expect("a session on the primary's pod");
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_postmaster_and_manager_hang_refuses_an_open_sessions_insert_after_a_promotion()
 {
    hung_manager(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_primary_whose_postmaster_and_manager_hang_refuses_an_open_sessions_insert_after_a_promotion()
 {
    hung_manager(Runtime::Docker).await;
}

async fn hung_manager(runtime: Runtime) {
    let world = World::start_on(runtime).await;
    world.create_cluster(CLUSTER, asynchronous_cluster()).await;
    world.wait_ready(CLUSTER, 3).await;
    let writer = world.ledger_writer(CLUSTER, WRITE_TIMEOUT).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let old = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let ip = pod_ip(&world, &old).await.expect("its IP");
    let session = session_on(&world, &ip).await;
    session
        .execute("insert into ledger (id) values (-1)", &[])
        .await
        .expect("the open session writes before the fault");
    let stop = Arc::new(AtomicBool::new(false));
    let direct = direct_writer(
        world.conninfo_at(&ip, CLUSTER).await,
        DIRECT_IDS,
        stop.clone(),
    );
    writer.wait_for_more(10, Duration::from_secs(30)).await;

    let faults = world.node.as_ref().expect("node").faults();
    let hung = Instant::now();
    let frozen = faults
        .freeze_where(NS, &old, "postgres", manager_or_postmaster)
        .expect("freeze");
    assert_eq!(frozen, 2, "the instance manager and the postmaster");
    let (new, serving) = promoted_instead_of(&world, &old).await;
    println!("{old} hung: {new} serving {:?} after", serving - hung);

    tokio::time::sleep(Duration::from_secs(3)).await;
    let insert = session.execute("insert into ledger (id) values (-2)", &[]);
    let outcome = tokio::time::timeout(Duration::from_secs(5), insert).await;
    println!(
        "the open session's insert on {old}, 3 s after {new} served: {}",
        match &outcome {
            Ok(Ok(_)) => "acknowledged".to_owned(),
            Ok(Err(error)) => format!("refused: {error}"),
            Err(_) => "no answer within 5 s".to_owned(),
        }
    );
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    stop.store(true, Ordering::SeqCst);
    let on_old = direct.await.expect("direct writer");
    let last_on_old = on_old
        .last()
        .map(|(_, at)| at.saturating_duration_since(hung));
    println!(
        "{} writes acknowledged by {old} directly, the last {last_on_old:?} after the hang",
        on_old.len()
    );
    eprintln!(
        "postmaster and manager hung: longest time without an acknowledged write through -rw {:?}",
        writer.longest_pause_since(hung)
    );
    faults.thaw(NS, &old, "postgres").expect("thaw");
    // Thawed, its manager finds PostgreSQL killed and rejoins as a
    // standby; the watchdog, fenced once for that lapse, leaves it be.
    rejoins_without_accepting_a_write(&world, CLUSTER, &old).await;
    writer.finish().await;
    assert!(
        !matches!(outcome, Ok(Ok(_))),
        "{old}, hung, acknowledged an insert 3 s after {new} was promoted"
    );
    assert!(
        !on_old.is_empty(),
        "the direct writer wrote before the hang"
    );
    assert!(
        last_on_old.is_some_and(|last| last < LEASE),
        "{old} acknowledged a write {last_on_old:?} after the hang, when the lease could have been taken over"
    );
    world.shutdown().await;
}
