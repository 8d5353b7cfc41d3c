//! Password rotation (R30), on the full sandbox with real
//! PostgreSQL: a password changed in any of a cluster's credentials
//! Secrets reaches PostgreSQL within about a minute (the kubelet rewrites
//! the Secret volume at its sync period, the instance manager reads the
//! files and sets the new password), with no restart and no dropped
//! connection. A session opened with the old application password writes
//! on throughout; afterwards the new passwords log in and the old one is
//! refused, and a standby whose PostgreSQL is then killed streams again
//! with the new replication password.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::writer::DIRECT_IDS;
use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};

const CLUSTER: &str = "rotate";

/// Logs in through `-rw` as `user` with `password`: Ok, or the error.
async fn log_in(host: &str, user: &str, password: &str, dbname: &str) -> Result<(), String> {
    let conninfo = format!(
        "host={host} port=5432 user={user} password={password} dbname={dbname} connect_timeout=3"
    );
    let attempt = tokio_postgres::connect(&conninfo, common::tls::encrypted());
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            client
                .simple_query("select 1")
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Ok(Err(error)) => Err(error
            .as_db_error()
            .map_or_else(|| error.to_string(), |db| db.message().to_owned())),
        Err(_) => Err("no answer within 5 s".into()),
    }
}

/// The user name and password in the Secret `name`.
async fn credential(secrets: &Api<Secret>, name: &str) -> (String, String) {
    let secret = secrets.get(name).await.expect("secret");
    let data = secret.data.unwrap_or_default();
    let field =
        |key: &str| String::from_utf8(data.get(key).expect("key").0.clone()).expect("UTF-8");
    (field("username"), field("password"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_passwords_reach_postgres_without_a_restart_or_a_dropped_connection() {
    let world = World::start().await;
    let (writer, primary) = world.durable_cluster_with_writer(CLUSTER, 5).await;
    // The superuser's new password is tried over the network.
    world
        .clusters()
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"postgres": {"superuserAccess": true}}})),
        )
        .await
        .expect("superuser access allowed");
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let rw = world.service_ip(&format!("{CLUSTER}-rw")).await;

    // One session, opened with the old password, writing throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let (client, connection) = tokio_postgres::connect(
        &world.conninfo_at(&rw, CLUSTER).await,
        common::tls::encrypted(),
    )
    .await
    .expect("a session with the old password");
    tokio::spawn(connection);
    let session = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut written, mut failures) = (Vec::new(), Vec::new());
            let mut id = DIRECT_IDS;
            while !stop.load(Ordering::SeqCst) {
                match client
                    .execute("insert into ledger (id) values ($1)", &[&id])
                    .await
                {
                    Ok(_) => written.push(id),
                    Err(error) => failures.push(error.to_string()),
                }
                id += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (written, failures)
        })
    };

    let before = world.restarts(CLUSTER).await;
    let mut old = Vec::new();
    for credential_name in ["app", "superuser", "replication"] {
        let name = format!("{CLUSTER}-{credential_name}");
        let (user, password) = credential(&secrets, &name).await;
        let rotated = format!("{password}-rotated");
        let patch = serde_json::json!({"stringData": {"password": rotated}});
        secrets
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("secret patched");
        old.push((credential_name, user, password, rotated));
    }
    let changed = Instant::now();

    let (_, app_user, app_old, app_new) = &old[0];
    wait_for(
        "the new application password",
        Duration::from_secs(150),
        || async { log_in(&rw, app_user, app_new, "app").await.is_ok() },
    )
    .await;
    println!(
        "the new application password works {:?} after the change",
        changed.elapsed()
    );
    let refused = log_in(&rw, app_user, app_old, "app").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("password authentication failed")),
        "the old application password: {refused:?}"
    );
    let (_, superuser, _, superuser_new) = &old[1];
    wait_for(
        "the new superuser password",
        Duration::from_secs(60),
        || async {
            log_in(&rw, superuser, superuser_new, "postgres")
                .await
                .is_ok()
        },
    )
    .await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    assert_eq!(world.restarts(CLUSTER).await, before, "nothing restarted");

    // A standby that has to connect again does so with the new
    // replication password (its volume was refreshed too): it streams,
    // and the primary counts it synchronous again.
    let standby = before
        .iter()
        .map(|(name, _)| name.clone())
        .find(|name| *name != primary)
        .expect("a standby");
    let faults = world.node.as_ref().expect("node").faults();
    faults.kill(NS, &standby, "postgres").expect("kill");
    world.wait_replicating(CLUSTER, 3).await;
    println!("{standby} streams again with the new replication password");

    stop.store(true, Ordering::SeqCst);
    let (written, failures) = session.await.expect("session");
    assert!(failures.is_empty(), "the old session failed: {failures:?}");
    // A write every 100 ms from before the rotation until the standby
    // streamed again: seconds, even with the tests' short volume refresh.
    assert!(
        written.len() >= 20,
        "the old session wrote {}",
        written.len()
    );
    let mut acknowledged = writer.finish().await;
    acknowledged.extend(&written);
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    println!(
        "{} writes acknowledged ({} on the session opened before the rotation), {stored} rows stored",
        acknowledged.len(),
        written.len()
    );
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");
    world.shutdown().await;
}
