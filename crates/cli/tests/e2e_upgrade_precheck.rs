//! The major upgrade's pre-check end to end (R27), on the full sandbox
//! with real PostgreSQL 15, 16 and 17, pgBackRest and the tests'
//! S3-compatible server: a cluster of 15 using `citext` (which the
//! PostgreSQL 16 installation lacks), backed up, is declared at 16. The
//! operator restores the newest backup in a pre-check pod and runs
//! `pg_upgrade --check` there; the check fails naming the library, the
//! upgrade is `Failed` saying nothing was stopped, and the primary never
//! stopped: a session opened before the upgrade was declared still
//! answers, on the same server process. The pre-check's pod and volume
//! are removed. Then 17, whose installation has `citext`, is declared
//! with a view on a statistics column 17 removed: `--check` passes, and
//! the pre-check's upgrade of its copy fails on the view, again with
//! nothing stopped. Without the view the pre-check passes, and only then
//! are the instances stopped and the data upgraded; archiving then resumes
//! on 17 (the stanza upgraded).

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use archive::{create_archiving_cluster, superuser, switch_wal_and_wait_stored, tusk_ok};
use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use stores::S3Server;
use tusk_api::conditions::{MAJOR_UPGRADE, find_condition};

const CLUSTER: &str = "pre";

/// The primary's pod uid and its server's start time.
async fn serving_process(world: &World, session: &tokio_postgres::Client) -> (String, String) {
    let pod = Api::<Pod>::namespaced(world.client.clone(), NS)
        .get(&format!("{CLUSTER}-1"))
        .await
        .expect("the primary's pod");
    let started: String = session
        .query_one("SELECT pg_postmaster_start_time()::text", &[])
        .await
        .expect("the session answers")
        .get(0);
    (pod.metadata.uid.unwrap_or_default(), started)
}

/// Takes a backup named `name` and waits for it (and for the first one
/// in status: the pre-check runs only for a cluster with a backup).
async fn backup(world: &World, name: &str) {
    tusk_ok(
        world,
        &["backup", CLUSTER, "-n", NS, "--name", name, "--wait", "300"],
        Duration::from_secs(330),
    )
    .await;
    wait_for("the backup in status", Duration::from_secs(60), || async {
        let status = world.status(CLUSTER).await;
        status
            .backup
            .is_some_and(|b| b.last_successful_backup_time.is_some())
    })
    .await;
}

/// Waits for the upgrade to `major` to fail in its pre-check, with
/// nothing stopped (`each_look` runs at every look), and returns the
/// `MajorUpgrade` condition's message.
async fn wait_failed<F: Future<Output = ()>>(
    world: &World,
    major: i32,
    each_look: impl Fn() -> F,
) -> String {
    wait_for("the upgrade failed", Duration::from_secs(300), || async {
        each_look().await;
        let status = world.status(CLUSTER).await;
        status
            .upgrade
            .is_some_and(|u| u.to_version == major && u.step == "Failed")
    })
    .await;
    let status = world.status(CLUSTER).await;
    let record = status.upgrade.clone().expect("the upgrade's record");
    let steps: Vec<&str> = record.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(steps, ["PreChecking", "Failed"], "{record:?}");
    assert_eq!(record.primary, None, "no instance was chosen to stop");
    assert_eq!(status.postgres_version, Some(15));
    let condition = find_condition(&status.conditions, MAJOR_UPGRADE).expect("the condition");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "Failed")
    );
    let time = |step: &str| {
        record
            .steps
            .iter()
            .find(|s| s.step == step)
            .map(|s| s.time.0)
    };
    let took = time("Failed")
        .zip(time("PreChecking"))
        .map(|(end, start)| end.duration_since(start));
    println!("pre-check of {major} failed after {took:?}");
    condition.message.clone()
}

async fn declare(world: &World, major: i32) {
    let patch = json!({"spec": {"postgres": {"version": major},
                                "upgrade": {"approvedVersion": major}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the major declared and approved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_major_upgrade_is_checked_on_a_restored_backup_before_anything_stops() {
    let world = World::start().await;
    let server = S3Server::start_listening(&["wal"], world.host_address_for_pods());
    create_archiving_cluster(&world, &server, CLUSTER, json!({})).await;
    world.wait_ready(CLUSTER, 1).await;
    let session = superuser(&world, NS, CLUSTER).await;
    session
        .batch_execute(
            "CREATE EXTENSION citext; CREATE TABLE words (w citext PRIMARY KEY);
             INSERT INTO words VALUES ('Tusk')",
        )
        .await
        .expect("citext in use");
    backup(&world, "pre-full").await;
    let before = serving_process(&world, &session).await;

    declare(&world, 16).await;
    let pods = Api::<Pod>::namespaced(world.client.clone(), NS);
    let claims = Api::<PersistentVolumeClaim>::namespaced(world.client.clone(), NS);
    let check = format!("{CLUSTER}-upgrade-check");
    let check_seen = AtomicBool::new(false);
    let message = wait_failed(&world, 16, || async {
        if pods.get_opt(&check).await.ok().flatten().is_some() {
            check_seen.store(true, Ordering::Relaxed);
        }
    })
    .await;
    assert!(
        message.contains("pre-check's check failed") && message.contains("citext"),
        "{message}"
    );
    println!("{message}");
    assert!(message.contains("nothing was stopped"), "{message}");

    // The primary never stopped: the session opened before still answers,
    // on the same server in the same pod.
    assert_eq!(serving_process(&world, &session).await, before);
    let words: i64 = session
        .query_one("SELECT count(*) FROM words WHERE w = 'tusk'", &[])
        .await
        .expect("the data is served")
        .get(0);
    assert_eq!(words, 1);
    wait_for(
        "the pre-check's pod and volume removed",
        Duration::from_secs(60),
        || async {
            pods.get_opt(&check).await.ok().flatten().is_none()
                && claims.get_opt(&check).await.ok().flatten().is_none()
        },
    )
    .await;
    assert!(
        check_seen.load(Ordering::Relaxed),
        "the pre-check ran in a pod of its own"
    );

    // 17 has citext, but a view on a statistics column 17 removed passes
    // `pg_upgrade --check` and fails only when the schema is restored in
    // 17: the pre-check's own upgrade of its copy finds it, and still
    // nothing stops.
    session
        .batch_execute("CREATE VIEW backend_writes AS SELECT buffers_backend FROM pg_stat_bgwriter")
        .await
        .expect("a view on a column 17 lacks");
    backup(&world, "pre-view").await;
    declare(&world, 17).await;
    let message = wait_failed(&world, 17, || async {}).await;
    println!("pre-check of 17 with the view: {message}");
    assert!(
        message.contains("pre-check's link failed") && message.contains("buffers_backend"),
        "{message}"
    );
    assert!(message.contains("nothing was stopped"), "{message}");
    assert_eq!(serving_process(&world, &session).await, before);

    // Without the view the pre-check passes once the spec changes (a
    // failed upgrade is tried again only then), and only then do the
    // instances stop and the data is upgraded.
    session
        .batch_execute("DROP VIEW backend_writes")
        .await
        .expect("the view dropped");
    backup(&world, "pre-clean").await;
    let patch = json!({"spec": {"postgres": {"parameters": {"work_mem": "8MB"}}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the spec changed");
    wait_for("the upgrade to 17", Duration::from_secs(400), || async {
        let status = world.status(CLUSTER).await;
        status.upgrade.is_some_and(|u| u.step == "Completed")
    })
    .await;
    let record = world.status(CLUSTER).await.upgrade.expect("the record");
    let steps: Vec<&str> = record.steps.iter().map(|s| s.step.as_str()).collect();
    let times: Vec<String> = record
        .steps
        .iter()
        .map(|s| format!("{} {}", s.step, s.time.0))
        .collect();
    println!("upgrade to 17: {}", times.join(", "));
    assert_eq!(
        steps[..2],
        ["PreChecking", "StoppingInstances"],
        "{record:?}"
    );
    assert_eq!(steps.last(), Some(&"Completed"), "{record:?}");
    let upgraded = world.connect(&format!("{CLUSTER}-rw"), CLUSTER).await;
    let major: String = upgraded
        .query_one("SHOW server_version_num", &[])
        .await
        .expect("the server answers")
        .get(0);
    assert!(major.starts_with("17"), "{major}");

    // Archiving resumes on 17: the primary upgrades the stanza, which
    // recorded 15, and the next finished segment reaches the store.
    switch_wal_and_wait_stored(&world, CLUSTER, Duration::from_secs(180)).await;
    world.shutdown().await;
}
