//! Azure Blob Storage repositories with real PostgreSQL and pgBackRest,
//! against a server speaking Azure's Blob REST API over HTTPS with a
//! private CA (`scripts/azure-test-server`, issue 16), which checks every
//! request's Shared Key signature as Azure does. Signed in with the
//! storage account's key (in pgBackRest's environment, never its file), a
//! primary archives and backs up to a container and a new cluster
//! restored from it has every row; a key the server does not know is
//! reported with the call that failed, never the key, and the WAL it could
//! not archive is kept.

mod common;

use std::time::Duration;

use common::backups::archive_back_up_and_restore;
use common::stores::AzureServer;
use common::{TestCluster, desired};
use tusk_api::contract::RepositoryKeys;

const CONTAINER: &str = "backups";
/// Bound on the wait for the refusal to be reported.
const WAIT: Duration = Duration::from_secs(120);

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
    // Another account key of the same form (base64 of 64 bytes).
    let other_key =
        "b3RoZXIta2V5LW9mLXRoZS1zYW1lLWZvcm0tYnV0LW5vdC10aGUtc2VydmVycy1vd24tLS0tLS0tLS0tLS0tLQ==";
    let wrong = RepositoryKeys {
        secret_access_key: other_key.into(),
        ..server.keys()
    };
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    db.settings.repository_keys = Some(wrong);
    let mut on_db = desired("db-1", db.address);
    on_db.archiving = Some(server.repository(CONTAINER, "tusk"));
    db.start(on_db);
    let report = db
        .wait_status("the stanza failure reported", WAIT, |r| {
            r.archiving
                .as_ref()
                .is_some_and(|a| a.failing && a.message.is_some())
        })
        .await;
    let failure = report.archiving.expect("archiving");
    assert!(!failure.stanza_created);
    // The refusal in pgBackRest's and the server's words; never the key.
    let message = failure.message.expect("message");
    assert!(
        message.contains("403") && message.contains("failed to authenticate the request"),
        "{message}"
    );
    assert!(!message.contains(other_key), "no key in the message");

    let client = db.superuser().await;
    client
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
        .await
        .expect("write");
    let segment: String = client
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0);
    db.wait_status(&format!("{segment} failing"), WAIT, |r| {
        r.archiving
            .as_ref()
            .is_some_and(|a| a.last_failed_wal.as_deref() == Some(segment.as_str()))
    })
    .await;
    let kept = db.settings.pgdata.join("pg_wal").join(&segment);
    assert!(kept.exists(), "{} is kept", kept.display());
    db.stop(Duration::from_secs(30)).await;
}
