//! End to end with an Azure Blob Storage destination, on the
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

use archive::{StoreCycle, archive_back_up_restore_and_refuse, create_secret};
use common::{NS, World};
use serde_json::json;
use stores::AzureServer;
use tusk_api::contract::{AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY};

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
    create_secret(&world, NS, "blob-other-keys", keys(AzureServer::OTHER_KEY)).await;
    let ca = std::fs::read_to_string(&server.served.ca_file).expect("the CA");
    create_secret(
        &world,
        NS,
        "blob-ca",
        BTreeMap::from([("ca.crt".to_owned(), ca)]),
    )
    .await;
    // The container `wal` of the server, signed in to with the keys of
    // the Secret named.
    let destination = |keys_secret: &str| {
        json!({
            "url": "az://wal/e2e",
            "endpoint": format!("https://{}:{}", server.served.host, server.served.port),
            "credentialsSecret": keys_secret,
            "caSecret": "blob-ca"})
    };
    archive_back_up_restore_and_refuse(
        &world,
        StoreCycle {
            name: "az",
            url: "az://wal/e2e",
            destination: &destination,
            keys_secret: "blob-keys",
            refused_secret: "blob-other-keys",
            refusal: "403",
            never: AzureServer::OTHER_KEY,
        },
    )
    .await;
    world.shutdown().await;
}
