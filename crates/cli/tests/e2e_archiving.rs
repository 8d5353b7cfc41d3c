//! End to end on the full sandbox with real PostgreSQL, pgBackRest and an
//! S3-compatible server over HTTPS with a private CA: a cluster
//! declaring `spec.backup` archives its WAL, says so with the
//! `ContinuousArchiving` condition, and records the newest archived
//! segment in `status.backup`; a backup asked for with `tusk backup` and
//! one created by `spec.backup.schedule` complete with pgBackRest's record
//! in their status; a new cluster in another namespace restored to a
//! moment has exactly the rows committed before it and archives to its
//! own path; a restore rehearsal asked for with `tusk rehearse` restores
//! the newest backup in a pod of its own, passes its checks, is recorded
//! and cleaned up; and a backup or a rehearsal of a cluster that declares
//! no destination fails saying so.

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::time::Duration;

use archive::{
    create_archiving_cluster, create_s3_secrets, object_store, superuser,
    switch_wal_and_wait_archived, tusk, tusk_ok,
};
use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;
use stores::S3Server;
use tusk_api::conditions::CONTINUOUS_ARCHIVING;
use tusk_api::v1alpha1::{
    BackupPhase, ClusterPhase, PostgresBackup, PostgresBackupStatus, PostgresCluster,
};

/// Generous: the pod starts, bootstraps, then the stanza is created over
/// HTTPS; under load on two cores this takes tens of seconds.
const ARCHIVING_WAIT: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_archives_its_wal_and_says_so() {
    let world = World::start().await;
    let server = S3Server::start_listening(&["wal"], world.host_address_for_pods());
    create_archiving_cluster(&world, &server, "arch", json!({})).await;
    world.wait_ready("arch", 1).await;

    let archiving = || async {
        let status = world.status("arch").await;
        status
            .conditions
            .iter()
            .find(|c| c.type_ == CONTINUOUS_ARCHIVING)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    wait_for("ContinuousArchiving True", ARCHIVING_WAIT, || async {
        archiving().await.is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    let status = world.status("arch").await;
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.type_ == tusk_api::conditions::UNSUPPORTED),
        "WAL archiving to S3 is supported: {:?}",
        status.conditions
    );

    // A finished segment is recorded as archived.
    let primary = superuser(&world, NS, "arch").await;
    primary
        .batch_execute("create table t (v int); insert into t select generate_series(1, 100)")
        .await
        .expect("write");
    switch_wal_and_wait_archived(&world, "arch", ARCHIVING_WAIT).await;
    let (state, reason, message) = archiving().await.expect("the condition");
    assert_eq!((state.as_str(), reason.as_str()), ("True", "Archiving"));
    assert!(message.contains("s3://wal/e2e"), "{message}");
    world.shutdown().await;
}

/// Runs `tusk` with `args` (at most 150 s), which must exit 1 (it ran and
/// reports a failure); what it printed.
async fn tusk_fails(world: &World, args: &[&str]) -> String {
    let output = tusk(world, args, Duration::from_secs(150)).await;
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "tusk {args:?}: {said}");
    said
}

async fn backup_status(world: &World, name: &str) -> Option<PostgresBackupStatus> {
    Api::<PostgresBackup>::namespaced(world.client.clone(), NS)
        .get(name)
        .await
        .ok()
        .and_then(|b| b.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backups_asked_for_and_scheduled_complete_and_a_cluster_without_a_destination_refuses() {
    let world = World::start().await;
    let server = S3Server::start_listening(&["wal"], world.host_address_for_pods());
    create_archiving_cluster(
        &world,
        &server,
        "bk",
        json!({"schedule": "* * * * *", "retentionDays": 7,
               "verify": {"schedule": "0 0 1 1 *"}}),
    )
    .await;
    world.wait_ready("bk", 1).await;

    // Asked for: `tusk backup` creates it and follows it to the end.
    let said = tusk_ok(
        &world,
        &[
            "backup", "bk", "-n", NS, "--name", "bk-now", "--wait", "300",
        ],
        Duration::from_secs(330),
    )
    .await;
    assert!(
        said.contains("bk-now: Completed on bk-1: backup "),
        "{said}"
    );
    let status = backup_status(&world, "bk-now").await.expect("a status");
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{status:?}");
    let id = status.backup_id.clone().expect("an id");
    assert!(id.ends_with('F'), "{id}");
    assert!(
        status.begin_lsn.is_some() && status.end_lsn.is_some(),
        "{status:?}"
    );
    assert!(status.size_bytes.is_some_and(|n| n > 0), "{status:?}");
    assert!(
        status
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with(&format!("s3://wal/e2e/{NS}/bk/backup/bk/"))),
        "{status:?}"
    );

    // Scheduled every minute: the operator creates one named after its
    // slot, owned by the cluster, and it completes.
    let scheduled = || async {
        Api::<PostgresBackup>::namespaced(world.client.clone(), NS)
            .list(&Default::default())
            .await
            .expect("backups")
            .items
            .into_iter()
            .find(|b| {
                b.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("bk-20"))
                    && b.status.as_ref().and_then(|s| s.phase) == Some(BackupPhase::Completed)
            })
    };
    wait_for(
        "a scheduled backup completed",
        Duration::from_secs(200),
        || async { scheduled().await.is_some() },
    )
    .await;
    let taken = scheduled().await.expect("the scheduled backup");
    let owners = taken.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.first().map(|o| o.name.as_str()), Some("bk"));
    let recorded = world.status("bk").await.backup.expect("status.backup");
    assert!(recorded.last_scheduled_backup.is_some(), "{recorded:?}");
    assert!(recorded.last_successful_backup.is_some(), "{recorded:?}");
    wait_for("LastBackupRecent True", Duration::from_secs(30), || async {
        world
            .status("bk")
            .await
            .conditions
            .iter()
            .any(|c| c.type_ == "LastBackupRecent" && c.status == "True")
    })
    .await;

    // Point-in-time: rows before the target come back, rows after do not,
    // in a new cluster of another namespace, archiving to its own path.
    let (target, segment) = rows_around_a_target(&world).await;
    wait_for(&format!("{segment} archived"), ARCHIVING_WAIT, || async {
        world
            .status("bk")
            .await
            .backup
            .and_then(|b| b.last_archived_wal)
            .is_some_and(|archived| archived >= segment)
    })
    .await;
    restore_into(&world, &server, "restored", "copy", &target).await;
    let copy = superuser(&world, "restored", "copy").await;
    let row = copy
        .query_one("SELECT count(*), max(v) FROM t", &[])
        .await
        .expect("the restored rows");
    assert_eq!(
        (row.get::<_, i64>(0), row.get::<_, Option<i32>>(1)),
        (100, Some(100)),
        "restored to {target}"
    );
    let restored = Api::<PostgresCluster>::namespaced(world.client.clone(), "restored");
    wait_for("the restored cluster archiving", ARCHIVING_WAIT, || async {
        restored
            .get("copy")
            .await
            .ok()
            .and_then(|c| c.status)
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == CONTINUOUS_ARCHIVING && c.status == "True")
            })
    })
    .await;

    rehearsal_on_demand(&world).await;

    // A cluster with no destination: the backup fails, saying why.
    world
        .create_cluster(
            "plain",
            json!({"instances": 1, "postgres": {"version": 15, "superuserAccess": true}, "storage": {"size": "1Gi"}}),
        )
        .await;
    let said = tusk_fails(
        &world,
        &[
            "backup",
            "plain",
            "-n",
            NS,
            "--name",
            "plain-now",
            "--wait",
            "120",
        ],
    )
    .await;
    assert!(
        said.contains("plain-now: Failed: cannot take a base backup: spec.backup is not set"),
        "{said}"
    );
    // Nor can it be rehearsed: the request is refused, saying why.
    let said = tusk_fails(&world, &["rehearse", "plain", "-n", NS, "--wait", "120"]).await;
    assert!(
        said.contains("no restore rehearsal: spec.backup is not set"),
        "{said}"
    );
    world.shutdown().await;
}

/// A rehearsal asked for on `bk` (`tusk rehearse`, which sets the
/// annotation) restores its newest backup in a pod of its
/// own, which passes every check; the outcome is recorded and the pod and
/// its scratch volume are removed.
async fn rehearsal_on_demand(world: &World) {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    let clusters = Api::<PostgresCluster>::namespaced(world.client.clone(), NS);
    // The newest backup when the rehearsal is asked for: the schedule
    // (every minute) may complete another while it runs.
    let newest_when_asked = world
        .status("bk")
        .await
        .backup
        .and_then(|b| b.last_successful_backup)
        .expect("a backup completed before the rehearsal");
    // `tusk rehearse` sets the annotation and follows the rehearsal.
    let started = std::time::Instant::now();
    let said = tusk_ok(
        world,
        &["rehearse", "bk", "-n", NS, "--wait", "300"],
        Duration::from_secs(330),
    )
    .await;
    assert!(
        said.contains("running in pod bk-rehearsal") && said.contains(" passed in "),
        "{said}"
    );
    let status = world.status("bk").await;
    let record = status.last_restore_verification.expect("recorded");
    println!(
        "rehearsal recorded {:?} after the request: {record:?}",
        started.elapsed()
    );
    assert!(record.succeeded, "{record:?}");
    // pgBackRest's labels (YYYYMMDD-hhmmssF) sort by time.
    assert!(
        record.backup_id >= newest_when_asked,
        "the newest backup when asked ({newest_when_asked}) or a newer one is restored: {record:?}"
    );
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "RestoreRehearsed")
        .map(|c| (c.status.clone(), c.reason.clone()));
    assert_eq!(
        condition,
        Some(("True".into(), "RehearsalSucceeded".into()))
    );
    let annotations = clusters.get("bk").await.expect("bk").metadata.annotations;
    assert!(
        !annotations
            .unwrap_or_default()
            .contains_key("tusk.dev/rehearse"),
        "the request is removed once acted on"
    );
    let pods = Api::<Pod>::namespaced(world.client.clone(), NS);
    let claims = Api::<PersistentVolumeClaim>::namespaced(world.client.clone(), NS);
    wait_for(
        "the rehearsal's pod and volume removed",
        Duration::from_secs(60),
        || async {
            pods.get_opt("bk-rehearsal").await.ok().flatten().is_none()
                && claims
                    .get_opt("bk-rehearsal")
                    .await
                    .ok()
                    .flatten()
                    .is_none()
        },
    )
    .await;
}

/// Writes rows 1 to 100 to a new table `t` of `bk`, notes the time, then
/// writes rows 101 to 200 and finishes the WAL segment; the time, and the
/// segment that must be archived before restoring.
async fn rows_around_a_target(world: &World) -> (String, String) {
    let primary = superuser(world, NS, "bk").await;
    primary
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await
        .expect("rows before");
    let target: String = primary
        .query_one(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            &[],
        )
        .await
        .expect("the target")
        .get(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    primary
        .batch_execute("INSERT INTO t SELECT generate_series(101, 200)")
        .await
        .expect("rows after");
    let segment: String = primary
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    (target, segment)
}

/// Creates namespace `ns` and in it the cluster `name` restored from
/// `bk`'s repository to `target`, archiving to the same bucket (its own
/// path); waits until it is ready.
async fn restore_into(world: &World, server: &S3Server, ns: &str, name: &str, target: &str) {
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace");
    Api::<Namespace>::all(world.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace created");
    create_s3_secrets(world, server, ns, name).await;
    let cluster: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"instances": 1, "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
                 "storage": {"size": "1Gi"},
                 "bootstrap": {"recovery": {"cluster": "bk", "namespace": NS, "targetTime": target,
                                            "source": object_store(server, name)}},
                 "backup": {"destination": object_store(server, name)}},
    }))
    .expect("a cluster");
    let clusters = Api::<PostgresCluster>::namespaced(world.client.clone(), ns);
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("created");
    wait_for(
        &format!("{ns}/{name} restored and ready"),
        Duration::from_secs(300),
        || async {
            clusters
                .get(name)
                .await
                .ok()
                .and_then(|c| c.status)
                .is_some_and(|s| s.phase == Some(ClusterPhase::Ready) && s.ready_instances == 1)
        },
    )
    .await;
}
