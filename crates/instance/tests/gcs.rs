//! Google Cloud Storage repositories with real parts: PostgreSQL,
//! pgBackRest and a server speaking GCS's JSON API over HTTPS with a
//! private CA (`scripts/gcs-test-server`, issue 16). Signed in as a
//! service account (pgBackRest signs a token request with the account's
//! key, the server checks the signature), a primary archives and backs up
//! to a bucket and a new cluster restored from it has every row; a key
//! the server does not know is reported with the call that failed, and
//! the WAL it could not archive is kept.

mod common;

use std::time::Duration;

use common::backups::archive_back_up_and_restore;
use common::stores::GcsServer;
use common::{TestCluster, desired};

const BUCKET: &str = "backups";
/// Bound on the wait for the refusal to be reported.
const WAIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcs_bucket_archives_backs_up_and_restores_signed_in_as_a_service_account() {
    common::init_logs();
    let server = GcsServer::start_listening(&[BUCKET], None);
    archive_back_up_and_restore(
        || server.repository(BUCKET, "tusk"),
        None,
        "gs://backups/tusk/default/db/backup/db/",
    )
    .await;
}

/// `key` written into `dir`, readable by PostgreSQL's user; its path.
fn key_file(key: &str, dir: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("key.json");
    std::fs::write(&path, key).expect("write the key");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_server_does_not_know_is_reported_and_the_wal_is_kept() {
    common::init_logs();
    let server = GcsServer::start_listening(&[BUCKET], None);
    let dir = tempfile::tempdir().expect("temporary directory");
    let wrong = key_file(&server.key_of_another_signer(), dir.path());
    let repository = server
        .repository(BUCKET, "tusk")
        .with_gcs_key_file(Some(wrong));
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    let mut on_db = desired("db-1", db.address);
    on_db.archiving = Some(repository);
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
    // The refusal and the call refused, in pgBackRest's and the server's
    // words; never the key.
    let message = failure.message.expect("message");
    assert!(
        message.contains("unable to get authentication token")
            && message.contains("Invalid JWT Signature"),
        "{message}"
    );
    assert!(!message.contains("PRIVATE KEY"), "no key in the message");

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
