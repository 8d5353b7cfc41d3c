//! End to end with an Azure Blob Storage destination (issue 16), on the
//! full sandbox with real PostgreSQL, pgBackRest and a server speaking
//! Azure's Blob REST API over HTTPS with a private CA, checking every
//! request's Shared Key signature (`scripts/azure-test-server`): the
//! credentials Secret holds the storage account and its key
//! (`AZURE_STORAGE_ACCOUNT`, `AZURE_STORAGE_KEY`), which reach pgBackRest
//! through the pod's environment. A cluster archives there, `tusk backup`
//! completes, and a new cluster restored from the container has every
//! row; a cluster given a key the server does not know says so in
//! `ContinuousArchiving`, naming the Secret and the refusal, never the
//! key.

#[path = "common/archive.rs"]
#[allow(dead_code)]
mod archive;
mod common;
#[path = "../../instance/tests/common/stores.rs"]
#[allow(dead_code)]
mod stores;

use std::collections::BTreeMap;
use std::time::Duration;

use archive::{create_secret, superuser, switch_wal_and_wait_stored, tusk_ok};
use common::{NS, World, wait_for};
use serde_json::json;
use stores::AzureServer;
use tusk_api::conditions::CONTINUOUS_ARCHIVING;
use tusk_api::contract::{AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY};

/// The pod starts, bootstraps, then the stanza is created over HTTPS.
const ARCHIVING_WAIT: Duration = Duration::from_secs(240);
/// A key of the same form as the server's (base64 of 64 bytes), not its.
const OTHER_KEY: &str =
    "b3RoZXIta2V5LW9mLXRoZS1zYW1lLWZvcm0tYnV0LW5vdC10aGUtc2VydmVycy1vd24tLS0tLS0tLS0tLS0tLQ==";

/// The container `wal` of `server` as a destination, signed in to with
/// the keys in Secret `key_secret`.
fn destination(server: &AzureServer, key_secret: &str) -> serde_json::Value {
    json!({
        "url": "az://wal/e2e",
        "endpoint": format!("https://{}:{}", server.served.host, server.served.port),
        "credentialsSecret": key_secret,
        "caSecret": "blob-ca"})
}

/// One instance of PostgreSQL 15 archiving to `destination`, restored
/// from `source` when given.
fn cluster(destination: serde_json::Value, source: Option<serde_json::Value>) -> serde_json::Value {
    let mut spec = json!({"instances": 1,
        "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
        "storage": {"size": "1Gi"},
        "backup": {"destination": destination}});
    if let Some(source) = source {
        spec["bootstrap"] = json!({"recovery": {"cluster": "az", "source": source}});
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
async fn an_azure_container_signed_in_to_with_the_accounts_key_archives_backs_up_and_restores() {
    let world = World::start().await;
    let server = AzureServer::start_listening(&["wal"], world.host_address_for_pods());
    let keys = |key: &str| {
        BTreeMap::from([
            (
                AZURE_STORAGE_ACCOUNT.to_owned(),
                server.served.account.clone(),
            ),
            (AZURE_STORAGE_KEY.to_owned(), key.to_owned()),
        ])
    };
    create_secret(&world, NS, "blob-keys", keys(&server.served.key)).await;
    create_secret(&world, NS, "blob-other-keys", keys(OTHER_KEY)).await;
    let ca = std::fs::read_to_string(&server.served.ca_file).expect("the CA");
    create_secret(
        &world,
        NS,
        "blob-ca",
        BTreeMap::from([("ca.crt".to_owned(), ca)]),
    )
    .await;

    world
        .create_cluster("az", cluster(destination(&server, "blob-keys"), None))
        .await;
    world
        .create_cluster(
            "az-refused",
            cluster(destination(&server, "blob-other-keys"), None),
        )
        .await;
    wait_for("az archiving", ARCHIVING_WAIT, || async {
        archiving(&world, "az")
            .await
            .is_some_and(|(s, _)| s == "True")
    })
    .await;
    let (_, message) = archiving(&world, "az").await.expect("the condition");
    assert!(message.contains("az://wal/e2e"), "{message}");

    let said = tusk_ok(
        &world,
        &[
            "backup", "az", "-n", NS, "--name", "az-now", "--wait", "300",
        ],
        Duration::from_secs(330),
    )
    .await;
    assert!(
        said.contains("az-now: Completed on az-1: backup "),
        "{said}"
    );
    let primary = superuser(&world, NS, "az").await;
    primary
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await
        .expect("rows after the backup");
    switch_wal_and_wait_stored(&world, "az", ARCHIVING_WAIT).await;

    world
        .create_cluster(
            "az-copy",
            cluster(
                destination(&server, "blob-keys"),
                Some(destination(&server, "blob-keys")),
            ),
        )
        .await;
    world.wait_ready("az-copy", 1).await;
    let copy = superuser(&world, NS, "az-copy").await;
    let rows: i64 = copy
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 100, "every row archived before the restore");

    wait_for("az-refused not archiving", ARCHIVING_WAIT, || async {
        archiving(&world, "az-refused")
            .await
            .is_some_and(|(s, _)| s == "False")
    })
    .await;
    let (_, message) = archiving(&world, "az-refused")
        .await
        .expect("the refused cluster's condition");
    assert!(
        message.contains("Secret blob-other-keys") && message.contains("403"),
        "{message}"
    );
    assert!(!message.contains(OTHER_KEY), "no key in the condition");
    world.shutdown().await;
}
