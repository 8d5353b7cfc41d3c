//! End to end on the full sandbox with real PostgreSQL, pgBackRest and an
//! S3-compatible server over HTTPS with a private CA (issue 16): a cluster
//! declaring `spec.backup` archives its WAL, says so with the
//! `ContinuousArchiving` condition, and records the newest archived
//! segment in `status.backup`.

mod common;
#[path = "../../instance/tests/common/s3.rs"]
#[allow(dead_code)]
mod s3;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use s3::S3Server;
use serde_json::json;
use tusk_api::conditions::CONTINUOUS_ARCHIVING;

/// Generous: the pod starts, bootstraps, then the stanza is created over
/// HTTPS; under load on two cores this takes tens of seconds.
const ARCHIVING_WAIT: Duration = Duration::from_secs(240);

async fn create_secret(world: &World, name: &str, data: BTreeMap<String, String>) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "stringData": data,
    }))
    .expect("a secret");
    Api::<Secret>::namespaced(world.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret created");
}

/// A superuser session on the primary (switching WAL is a superuser's).
async fn superuser(world: &World, cluster: &str) -> tokio_postgres::Client {
    let secret = Api::<Secret>::namespaced(world.client.clone(), NS)
        .get(&format!("{cluster}-superuser"))
        .await
        .expect("superuser secret");
    let field = |key: &str| {
        let data = secret.data.clone().unwrap_or_default();
        String::from_utf8(data.get(key).expect("key").0.clone()).expect("UTF-8")
    };
    let host = world.service_ip(&format!("{cluster}-rw")).await;
    let config = format!(
        "host={host} port=5432 user={} password={} dbname=postgres connect_timeout=5",
        field("username"),
        field("password")
    );
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .expect("superuser connection");
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_archives_its_wal_and_says_so() {
    let server = S3Server::start(&["wal"]);
    let world = World::start().await;
    let keys = server.keys();
    create_secret(
        &world,
        "arch-s3",
        BTreeMap::from([
            ("ACCESS_KEY_ID".to_owned(), keys.access_key_id.clone()),
            (
                "SECRET_ACCESS_KEY".to_owned(),
                keys.secret_access_key.clone(),
            ),
        ]),
    )
    .await;
    let ca = std::fs::read_to_string(&server.served.ca_file).expect("the CA");
    create_secret(
        &world,
        "arch-s3-ca",
        BTreeMap::from([("ca.crt".to_owned(), ca)]),
    )
    .await;
    world
        .create_cluster(
            "arch",
            json!({"instances": 1, "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                   "storage": {"size": "1Gi"},
                   "backup": {"destination": {
                       "url": "s3://wal/e2e",
                       "endpoint": format!("https://{}:{}", server.served.host, server.served.port),
                       "region": server.served.region,
                       "credentialsSecret": "arch-s3",
                       "caSecret": "arch-s3-ca"}}}),
        )
        .await;
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
    let primary = superuser(&world, "arch").await;
    primary
        .batch_execute("create table t (v int); insert into t select generate_series(1, 100)")
        .await
        .expect("write");
    let segment: String = primary
        .query_one("select pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    wait_for(
        &format!("{segment} in status.backup.lastArchivedWal"),
        ARCHIVING_WAIT,
        || async {
            world
                .status("arch")
                .await
                .backup
                .and_then(|b| b.last_archived_wal)
                .is_some_and(|archived| archived >= segment)
        },
    )
    .await;
    let (state, reason, message) = archiving().await.expect("the condition");
    assert_eq!((state.as_str(), reason.as_str()), ("True", "Archiving"));
    assert!(message.contains("s3://wal/e2e"), "{message}");
    world.shutdown().await;
}
