//! End to end with a Google Cloud Storage destination, on the
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

use archive::{StoreCycle, archive_back_up_restore_and_refuse, create_secret};
use common::{NS, World};
use serde_json::json;
use stores::GcsServer;
use tusk_api::contract::GCS_SERVICE_ACCOUNT_KEY;

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
    // The bucket `wal` of the server, signed in to with the key in the
    // Secret named.
    let destination = |key_secret: &str| {
        json!({
            "url": "gs://wal/e2e",
            "endpoint": format!("https://{}:{}", server.served.host, server.served.port),
            "credentialsSecret": key_secret,
            "caSecret": "bucket-ca"})
    };
    archive_back_up_restore_and_refuse(
        &world,
        StoreCycle {
            name: "gcs",
            url: "gs://wal/e2e",
            destination: &destination,
            keys_secret: "bucket-key",
            refused_secret: "bucket-other-key",
            refusal: "Invalid JWT Signature",
            never: "PRIVATE KEY",
        },
    )
    .await;
    world.shutdown().await;
}
