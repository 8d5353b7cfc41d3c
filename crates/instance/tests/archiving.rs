//! Continuous WAL archiving with real parts: PostgreSQL, pgBackRest and an
//! S3-compatible server over HTTPS. A finished segment reaches
//! the repository; a wrong credential is reported, with pgBackRest's
//! message, and the WAL it could not archive is kept and counted, never
//! silently dropped or left to fill the disk unseen; an object store that
//! stops is reported the same way, and once it is back every segment
//! finished meanwhile reaches it, with no gap; one that never answers is
//! reported with its cause within a minute.

mod common;

use std::time::Duration;

use common::outage::Relay;
use common::stores::S3Server;
use common::{TestCluster, TestInstance, desired};
use tusk_api::contract::RepositoryKeys;
use tusk_api::instance::ArchivingReport;
use tusk_api::pgbackrest::Repository;
use tusk_instance::context::InstanceContext;

const BUCKET: &str = "wal";
/// Bound on every wait for the archiver (it retries a failed segment after
/// a minute at most; a healthy push takes well under a second).
const ARCHIVE_WAIT: Duration = Duration::from_secs(120);

/// Starts `db-1` as a primary archiving to `repository` with `keys`.
async fn archiving_primary(
    cluster: &mut TestCluster,
    repository: Repository,
    keys: RepositoryKeys,
) -> TestInstance {
    let mut db = cluster.instance("db-1");
    db.settings.repository_keys = Some(keys);
    let mut on_db = desired("db-1", db.address);
    on_db.archiving = Some(repository);
    db.start(on_db);
    db.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    db
}

fn archiving(report: &tusk_api::instance::InstanceReport) -> ArchivingReport {
    report.archiving.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_wal_segment_reaches_the_repository() {
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let mut cluster = TestCluster::new();
    let mut db = archiving_primary(
        &mut cluster,
        server.repository(BUCKET, "tusk"),
        server.keys(),
    )
    .await;
    db.wait_status("the stanza", ARCHIVE_WAIT, |r| archiving(r).stanza_created)
        .await;

    let segment = db.finish_a_segment().await;
    let report = db
        .wait_status(&format!("{segment} archived"), ARCHIVE_WAIT, |r| {
            archiving(r)
                .last_archived_wal
                .is_some_and(|archived| archived >= segment)
        })
        .await;
    let archiving = archiving(&report);
    assert!(!archiving.failing, "{archiving:?}");
    assert_eq!(archiving.stanza, "db");
    assert!(archiving.last_archived_time.is_some());

    // The repository itself holds it: pgBackRest's own view of the stanza.
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    let info =
        tusk_instance::archiving::run(&ctx, &["info", "--output=json"], Duration::from_secs(60))
            .await
            .expect("pgbackrest info");
    let info: serde_json::Value = serde_json::from_str(&info).expect("JSON");
    let newest = info[0]["archive"][0]["max"]
        .as_str()
        .unwrap_or_else(|| panic!("archived WAL in the repository: {info}"));
    assert!(newest >= segment.as_str(), "{newest} < {segment}");
    db.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_credential_is_reported_and_the_wal_is_kept() {
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let mut cluster = TestCluster::new();
    let wrong = RepositoryKeys {
        secret_access_key: "not-the-secret".into(),
        ..server.keys()
    };
    let mut db = archiving_primary(&mut cluster, server.repository(BUCKET, "tusk"), wrong).await;
    let report = db
        .wait_status("the stanza failure reported", ARCHIVE_WAIT, |r| {
            archiving(r).failing && archiving(r).message.is_some()
        })
        .await;
    let failure = archiving(&report);
    assert!(!failure.stanza_created);
    let message = failure.message.expect("message");
    // The refusal and the call refused, in pgBackRest's words.
    assert!(
        message.contains("403") && message.contains("/wal/tusk/default/db/"),
        "{message}"
    );
    assert!(
        !message.contains("not-the-secret"),
        "no secret in the message"
    );

    // PostgreSQL's archiver fails on the finished segment, and keeps it.
    let segment = db.finish_a_segment().await;
    let report = db
        .wait_status(&format!("{segment} failing"), ARCHIVE_WAIT, |r| {
            archiving(r).last_failed_wal.as_deref() == Some(segment.as_str())
        })
        .await;
    let failure = archiving(&report);
    assert!(failure.failing);
    assert!(failure.failed_count >= 1);
    assert_eq!(failure.last_archived_wal, None);
    assert!(
        failure.pending_segments.is_some_and(|n| n >= 1),
        "the waiting segment is counted: {failure:?}"
    );
    let kept = db.settings.pgdata.join("pg_wal").join(&segment);
    assert!(kept.exists(), "{} is kept", kept.display());

    // The failure is a metric too, for alerts (TuskWalArchivingFailing).
    let (code, metrics) = db.http_get("/metrics").await;
    assert_eq!(code, 200, "{metrics}");
    let value = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<i64>().ok())
    };
    assert_eq!(
        value("tusk_postgres_archiving_failing"),
        Some(1),
        "{metrics}"
    );
    assert!(
        value("tusk_postgres_archive_failures").is_some_and(|n| n >= 1),
        "{metrics}"
    );
    assert!(
        value("tusk_postgres_archive_pending_segments").is_some_and(|n| n >= 1),
        "{metrics}"
    );
    db.stop(Duration::from_secs(30)).await;
}

/// An object store nobody answers at (a port with no listener): the
/// stanza's failure is reported with pgBackRest's cause within a minute,
/// not after the manager's three-minute bound on `stanza-create` with
/// only "took too long" to say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_object_store_is_reported_with_its_cause() {
    common::init_logs();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let repository = Repository::s3(
        "s3://wal/tusk",
        Some(&format!("https://127.0.0.1:{closed}")),
        None,
    )
    .expect("a repository");
    let keys = RepositoryKeys::s3("id".into(), "secret".into());
    let mut cluster = TestCluster::new();
    let mut db = archiving_primary(&mut cluster, repository, keys).await;
    let report = db
        .wait_status("the stanza failure reported", ARCHIVE_WAIT, |r| {
            archiving(r).failing && archiving(r).message.is_some()
        })
        .await;
    let message = archiving(&report).message.expect("message");
    assert!(
        message.contains("Connection refused") && message.contains(&closed.to_string()),
        "{message}"
    );
    db.stop(Duration::from_secs(30)).await;
}

/// Whether pgBackRest can fetch `segment` back from the repository.
async fn in_repository(ctx: &InstanceContext, fetched: &std::path::Path, segment: &str) -> bool {
    let into = fetched.join(segment).display().to_string();
    tusk_instance::archiving::run(
        ctx,
        &["archive-get", segment, &into],
        Duration::from_secs(60),
    )
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_object_store_is_reported_and_archiving_catches_up_with_no_gap() {
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let store = Relay::start(server.address()).await;
    let mut cluster = TestCluster::new();
    let repository = server.repository_through(BUCKET, "tusk", store.port);
    let mut db = archiving_primary(&mut cluster, repository, server.keys()).await;
    db.wait_status("the stanza", ARCHIVE_WAIT, |r| archiving(r).stanza_created)
        .await;
    let before = db.finish_a_segment().await;
    db.wait_status(&format!("{before} archived"), ARCHIVE_WAIT, |r| {
        archiving(r)
            .last_archived_wal
            .is_some_and(|archived| archived >= before)
    })
    .await;

    // The store stops: the next segments fail, are reported and kept.
    store.down();
    let mut finished = Vec::new();
    for _ in 0..3 {
        finished.push(db.finish_a_segment().await);
    }
    let first = finished[0].clone();
    let report = db
        .wait_status(&format!("{first} failing"), ARCHIVE_WAIT, |r| {
            archiving(r).failing && archiving(r).last_failed_wal.as_deref() == Some(first.as_str())
        })
        .await;
    let failure = archiving(&report);
    assert!(
        failure.pending_segments.is_some_and(|n| n >= 3),
        "every waiting segment is counted: {failure:?}"
    );
    // Why, in pgBackRest's words (its asynchronous push gave up and
    // recorded the cause), not only that the push timed out.
    let message = failure.message.clone().unwrap_or_default();
    assert!(
        message.contains("(pgBackRest error ") && !message.contains("asynchronously after"),
        "pgBackRest's reason for the failure: {failure:?}"
    );
    println!("reported during the outage: {message}");
    for segment in &finished {
        let kept = db.settings.pgdata.join("pg_wal").join(segment);
        assert!(kept.exists(), "{} is kept", kept.display());
    }

    // Back: archiving catches up and reports healthy again.
    store.up();
    let last = finished.last().expect("segments").clone();
    let report = db
        .wait_status(&format!("{last} archived"), ARCHIVE_WAIT, |r| {
            archiving(r)
                .last_archived_wal
                .is_some_and(|archived| archived >= last)
                && !archiving(r).failing
        })
        .await;
    assert_eq!(archiving(&report).pending_segments, Some(0), "{report:?}");

    // No gap: every segment from before the outage to the last is in the
    // repository, as a restore would fetch it.
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    let fetched = tempfile::tempdir().expect("temporary directory");
    std::fs::set_permissions(
        fetched.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    for segment in std::iter::once(&before).chain(&finished) {
        assert!(
            in_repository(&ctx, fetched.path(), segment).await,
            "{segment} is in the repository"
        );
    }
    db.stop(Duration::from_secs(30)).await;
}
