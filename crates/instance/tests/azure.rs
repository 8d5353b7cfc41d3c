//! Azure Blob Storage repositories with real PostgreSQL and pgBackRest,
//! against a server speaking Azure's Blob REST API over HTTPS with a
//! private CA (`scripts/azure-test-server`), which checks every
//! request's Shared Key signature as Azure does. Signed in with the
//! storage account's key (in pgBackRest's environment, never its file), a
//! primary archives and backs up to a container and a new cluster
//! restored from it has every row; a key the server does not know is
//! reported with the call that failed, never the key, and the WAL it could
//! not archive is kept.

mod common;

use common::TestCluster;
use common::backups::{archive_back_up_and_restore, refused, refused_segment_is_kept};
use common::stores::AzureServer;
use tusk_api::contract::RepositoryKeys;

const CONTAINER: &str = "backups";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_container_archives_backs_up_and_restores_signed_in_with_the_accounts_key() {
    common::init_logs();
    let server = AzureServer::start_listening(&[CONTAINER], None);
    archive_back_up_and_restore(
        || server.repository(CONTAINER, "tusk"),
        Some(server.keys()),
        "az://backups/tusk/default/db/backup/db/",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_server_does_not_know_is_reported_and_the_wal_is_kept() {
    common::init_logs();
    let server = AzureServer::start_listening(&[CONTAINER], None);
    let other_key = AzureServer::OTHER_KEY;
    let wrong = RepositoryKeys {
        secret_access_key: other_key.into(),
        ..server.keys()
    };
    let mut cluster = TestCluster::new();
    let (db, message) = refused(
        &mut cluster,
        server.repository(CONTAINER, "tusk"),
        Some(wrong),
        other_key,
    )
    .await;
    // The refusal in pgBackRest's and the server's words.
    assert!(
        message.contains("403") && message.contains("failed to authenticate the request"),
        "{message}"
    );
    refused_segment_is_kept(db).await;
}
