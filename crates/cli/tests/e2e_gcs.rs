//! End to end with a Google Cloud Storage destination (issue 16), on the
//! full sandbox with real PostgreSQL, pgBackRest and a server speaking
//! GCS's JSON API over HTTPS with a private CA (`scripts/gcs-test-server`):
//! the credentials Secret holds a service account's JSON key, which the
//! pods mount as a file and pgBackRest signs its token requests with. A
//! cluster archives there, `tusk backup` completes, and a new cluster
//! restored from the bucket has every row; a cluster given a key the
//! server does not know says so in `ContinuousArchiving`, naming the
//! Secret and the refusal.

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::collections::BTreeMap;
use std::time::Duration;

use archive::{create_secret, superuser, switch_wal_and_wait_archived, tusk_ok};
use common::{NS, World, wait_for};
use serde_json::json;
use stores::GcsServer;
use tusk_api::conditions::CONTINUOUS_ARCHIVING;
use tusk_api::contract::GCS_SERVICE_ACCOUNT_KEY;

/// The pod starts, bootstraps, then the stanza is created over HTTPS.
const ARCHIVING_WAIT: Duration = Duration::from_secs(240);

/// The bucket `wal` of `server` as a destination, signed in to with the
/// key in Secret `key_secret`.
fn destination(server: &GcsServer, key_secret: &str) -> serde_json::Value {
    json!({
        "url": "gs://wal/e2e",
        "endpoint": format!("https://{}:{}", server.served.host, server.served.port),
        "credentialsSecret": key_secret,
        "caSecret": "bucket-ca"})
}

/// One instance of PostgreSQL 15 archiving to `destination`, restored
/// from `source` when given.
fn cluster(destination: serde_json::Value, source: Option<serde_json::Value>) -> serde_json::Value {
    let mut spec = json!({"instances": 1,
        "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
        "storage": {"size": "1Gi"},
        "backup": {"destination": destination}});
    if let Some(source) = source {
        spec["bootstrap"] = json!({"recovery": {"cluster": "gcs", "source": source}});
    }
    spec
}

/// `ContinuousArchiving` of `name`: status and message.
async fn archiving(world: &World, name: &str) -> Option<(String, String)> {
    let status = world.status(name).await;
    let condition = status
        .conditions
        .into_iter()
        .find(|c| c.type_ == CONTINUOUS_ARCHIVING)?;
    Some((condition.status, condition.message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcs_bucket_signed_in_to_with_a_service_account_key_archives_backs_up_and_restores() {
    let world = World::start().await;
    let server = GcsServer::start_listening(&["wal"], world.host_address_for_pods());
    let secret = |key: String| BTreeMap::from([(GCS_SERVICE_ACCOUNT_KEY.to_owned(), key)]);
    create_secret(&world, NS, "bucket-key", secret(server.key())).await;
    let ca = std::fs::read_to_string(&server.served.ca_file).expect("the CA");
    create_secret(
        &world,
        NS,
        "bucket-ca",
        BTreeMap::from([("ca.crt".to_owned(), ca)]),
    )
    .await;
    // The same account with another signing key: the server refuses it.
    create_secret(
        &world,
        NS,
        "bucket-other-key",
        secret(server.key_of_another_signer()),
    )
    .await;

    world
        .create_cluster("gcs", cluster(destination(&server, "bucket-key"), None))
        .await;
    world
        .create_cluster(
            "gcs-refused",
            cluster(destination(&server, "bucket-other-key"), None),
        )
        .await;
    wait_for("gcs archiving", ARCHIVING_WAIT, || async {
        archiving(&world, "gcs")
            .await
            .is_some_and(|(s, _)| s == "True")
    })
    .await;
    let (_, message) = archiving(&world, "gcs").await.expect("the condition");
    assert!(message.contains("gs://wal/e2e"), "{message}");

    let said = tusk_ok(
        &world,
        &[
            "backup", "gcs", "-n", NS, "--name", "gcs-now", "--wait", "300",
        ],
        Duration::from_secs(330),
    )
    .await;
    assert!(
        said.contains("gcs-now: Completed on gcs-1: backup "),
        "{said}"
    );
    let primary = superuser(&world, NS, "gcs").await;
    primary
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await
        .expect("rows after the backup");
    switch_wal_and_wait_archived(&world, "gcs", ARCHIVING_WAIT).await;

    world
        .create_cluster(
            "gcs-copy",
            cluster(
                destination(&server, "bucket-key"),
                Some(destination(&server, "bucket-key")),
            ),
        )
        .await;
    world.wait_ready("gcs-copy", 1).await;
    let copy = superuser(&world, NS, "gcs-copy").await;
    let rows: i64 = copy
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 100, "every row archived before the restore");

    wait_for("gcs-refused not archiving", ARCHIVING_WAIT, || async {
        archiving(&world, "gcs-refused")
            .await
            .is_some_and(|(s, _)| s == "False")
    })
    .await;
    let (_, message) = archiving(&world, "gcs-refused")
        .await
        .expect("the refused cluster's condition");
    assert!(
        message.contains("Secret bucket-other-key") && message.contains("Invalid JWT Signature"),
        "{message}"
    );
    assert!(!message.contains("PRIVATE KEY"), "no key in the condition");
    world.shutdown().await;
}
