//! Google Cloud Storage repositories with real parts: PostgreSQL,
//! pgBackRest and a server speaking GCS's JSON API over HTTPS with a
//! private CA (`scripts/gcs-test-server`). Signed in as a
//! service account (pgBackRest signs a token request with the account's
//! key, the server checks the signature), a primary archives and backs up
//! to a bucket and a new cluster restored from it has every row; a key
//! the server does not know is reported with the call that failed, and
//! the WAL it could not archive is kept.

mod common;

use common::TestCluster;
use common::backups::{archive_back_up_and_restore, refused, refused_segment_is_kept};
use common::stores::GcsServer;

const BUCKET: &str = "backups";

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
    let (db, message) = refused(&mut cluster, repository, None, "PRIVATE KEY").await;
    // The refusal and the call refused, in pgBackRest's and the server's
    // words.
    assert!(
        message.contains("unable to get authentication token")
            && message.contains("Invalid JWT Signature"),
        "{message}"
    );
    refused_segment_is_kept(db).await;
}
