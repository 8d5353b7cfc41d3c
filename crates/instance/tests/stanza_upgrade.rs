//! The pgBackRest stanza after a major upgrade, with real parts:
//! PostgreSQL, pgBackRest and an S3-compatible server over HTTPS.
//!
//! After `pg_upgrade` the stanza records the old major and system
//! identifier, `stanza-create` refuses it, and the primary upgrades the
//! stanza so that archiving resumes; a stanza recording another database
//! (of the same major, or a newer one) is never taken over.
//!
//! The upgraded case is played on 15, whose installation is the host's:
//! the stanza the 15 primary made is rewritten in the store as the same
//! cluster's stanza would read before an upgrade from 14 (a 14 database
//! with another system identifier, written as pgBackRest writes its info
//! files), and the primary restarts, as it does on upgraded data. A real
//! upgrade, 15 to 17, resumes archiving in the end-to-end test
//! `e2e_upgrade_precheck`.

mod common;

use std::time::Duration;

use common::stores::S3Server;
use common::{TestCluster, TestInstance, desired};
use tusk_api::instance::InstanceReport;
use tusk_instance::context::InstanceContext;
use tusk_instance::desired::DesiredState;
use tusk_postgres::pgbackrest::DATABASE_MISMATCH;

const BUCKET: &str = "backups";
const PREFIX: &str = "tusk";
/// Bound on each wait: the stanza (or its refusal), then one WAL segment
/// pushed.
const WAIT: Duration = Duration::from_secs(180);
/// PostgreSQL 14's catalog version, as pgBackRest records it.
const CATALOG_14: u64 = 202_107_181;
/// PostgreSQL 16's.
const CATALOG_16: u64 = 202_307_071;
/// Not the system identifier of any database made here.
const OTHER_SYSTEM_ID: u64 = 7_000_000_000_000_000_001;

/// `db-1` of cluster `db`, archiving to `server`.
fn archiving_instance(
    cluster: &mut TestCluster,
    server: &S3Server,
) -> (TestInstance, DesiredState) {
    let mut db = cluster.instance("db-1");
    db.settings.repository_keys = Some(server.keys());
    let on_db = DesiredState {
        archiving: Some(server.repository(BUCKET, PREFIX)),
        ..desired("db-1", db.address)
    };
    (db, on_db)
}

fn stanza_created(report: &InstanceReport) -> bool {
    report.ready && report.archiving.as_ref().is_some_and(|a| a.stanza_created)
}

/// Waits until the stanza is refused because it records another
/// database; the message reported.
async fn refused(db: &TestInstance) -> String {
    let report = db
        .wait_status("the stanza refused", WAIT, |r| {
            r.archiving
                .as_ref()
                .and_then(|a| a.message.as_deref())
                .is_some_and(|m| m.contains(DATABASE_MISMATCH))
        })
        .await;
    let archiving = report.archiving.expect("archiving reported");
    assert!(!archiving.stanza_created, "{archiving:?}");
    assert!(archiving.failing, "{archiving:?}");
    archiving.message.unwrap_or_default()
}

/// The databases the stanza's history records, oldest first: (major,
/// system identifier).
async fn recorded(db: &TestInstance) -> Vec<(String, u64)> {
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    let json = tusk_instance::archiving::run(&ctx, &["info", "--output=json"], WAIT)
        .await
        .expect("pgbackrest info");
    let info: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let mut history: Vec<(i64, String, u64)> = info[0]["db"]
        .as_array()
        .expect("the stanza's databases")
        .iter()
        .map(|db| {
            (
                db["id"].as_i64().expect("id"),
                db["version"].as_str().expect("version").to_owned(),
                db["system-id"].as_u64().expect("system id"),
            )
        })
        .collect();
    history.sort();
    history.into_iter().map(|(_, v, s)| (v, s)).collect()
}

async fn system_id(client: &tokio_postgres::Client) -> u64 {
    let id: i64 = client
        .query_one("select system_identifier from pg_control_system()", &[])
        .await
        .expect("system identifier")
        .get(0);
    u64::try_from(id).expect("a positive identifier")
}

/// Writes a row, switches WAL, and waits (bounded) until the archiver
/// reports the segment archived; then `pgbackrest check` proves a segment
/// switched now reaches the repository.
async fn a_switched_segment_is_archived(db: &TestInstance, client: &tokio_postgres::Client) {
    client
        .batch_execute("create table if not exists t (v int); insert into t values (1)")
        .await
        .expect("a write");
    db.switch_wal_until_archived(client, WAIT).await;
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    tusk_instance::archiving::run(&ctx, &["check"], WAIT)
        .await
        .expect("pgbackrest check: WAL reaches the repository");
}

/// Rewrites the stanza's four info files in the store so that it records
/// one database, of `major` (its catalog `catalog`) with system identifier
/// `system_id`: what the stanza of that database would hold. The files are
/// written as pgBackRest 2.45 writes them, checksum included.
fn record_in_store(server: &S3Server, major: u32, catalog: u64, system_id: u64) {
    const REWRITE: &str = r#"
import hashlib, json, sys
import boto3
a = json.loads(sys.argv[1])
s3 = boto3.client("s3", endpoint_url="https://%s:%d" % (a["host"], a["port"]),
                  region_name=a["region"], aws_access_key_id=a["key"],
                  aws_secret_access_key=a["secret"], verify=a["ca"])
version, sid, catalog = json.dumps(a["major"]), a["system_id"], a["catalog"]
def info(db, history):
    sections = [("backrest", [("backrest-format", "5"), ("backrest-version", '"2.45"')]),
                ("db", db), ("db:history", [("1", history)])]
    # pgBackRest's checksum: SHA-1 of the sections as JSON, in file order.
    body = "{" + ",".join(json.dumps(name) + ":{" + ",".join(json.dumps(k) + ":" + v for k, v in keys) + "}"
                          for name, keys in sections) + "}"
    text = "".join("[%s]\n%s\n" % (name, "".join("%s=%s\n" % kv for kv in keys)) for name, keys in sections)
    return text + '[backrest]\nbackrest-checksum="%s"\n' % hashlib.sha1(body.encode()).hexdigest()
archive = info([("db-id", "1"), ("db-system-id", str(sid)), ("db-version", version)],
               '{"db-id":%d,"db-version":%s}' % (sid, version))
backup = info([("db-catalog-version", str(catalog)), ("db-control-version", "1300"), ("db-id", "1"),
               ("db-system-id", str(sid)), ("db-version", version)],
              '{"db-catalog-version":%d,"db-control-version":1300,"db-system-id":%d,"db-version":%s}'
              % (catalog, sid, version))
for key, body in [("archive/db/archive.info", archive), ("backup/db/backup.info", backup)]:
    for suffix in ["", ".copy"]:
        s3.put_object(Bucket=a["bucket"], Key=a["path"] + key + suffix, Body=body.encode())
"#;
    let served = &server.served;
    let args = serde_json::json!({
        "host": served.host, "port": served.port, "region": served.region,
        "key": served.access_key_id, "secret": served.secret_access_key,
        "ca": served.ca_file, "bucket": BUCKET, "path": format!("{PREFIX}/default/db/"),
        "major": major.to_string(), "catalog": catalog, "system_id": system_id,
    });
    let output = std::process::Command::new("python3")
        .args(["-c", REWRITE, &args.to_string()])
        .output()
        .expect("python3 runs (scripts/setup installs boto3 with moto)");
    assert!(
        output.status.success(),
        "rewriting the stanza failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A new S3 server, and `db-1` archiving to it with its stanza created,
/// then stopped.
async fn stopped_after_creating_its_stanza() -> (S3Server, TestCluster, TestInstance, DesiredState)
{
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let mut cluster = TestCluster::new();
    let (mut db, on_db) = archiving_instance(&mut cluster, &server);
    db.start(on_db.clone());
    db.wait_status("the stanza", WAIT, stanza_created).await;
    db.stop(Duration::from_secs(30)).await;
    (server, cluster, db, on_db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stanza_of_the_database_upgraded_from_is_upgraded_and_archiving_resumes() {
    let (server, _cluster, mut db, on_db) = stopped_after_creating_its_stanza().await;
    // The stanza as the cluster left it before its upgrade from 14.
    record_in_store(&server, 14, CATALOG_14, OTHER_SYSTEM_ID);

    db.start(on_db);
    let report = db
        .wait_status("the stanza upgraded", WAIT, stanza_created)
        .await;
    let archiving = report.archiving.expect("archiving reported");
    assert_eq!(archiving.message, None, "{archiving:?}");
    let client = db.superuser().await;
    let this = system_id(&client).await;
    assert_eq!(
        recorded(&db).await,
        [("14".to_owned(), OTHER_SYSTEM_ID), ("15".to_owned(), this)],
        "the upgraded database is recorded after the one it was upgraded from"
    );
    a_switched_segment_is_archived(&db, &client).await;
    db.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stanza_of_a_newer_database_is_not_taken_over() {
    let (server, _cluster, mut db, on_db) = stopped_after_creating_its_stanza().await;
    // A 16 cluster's stanza: a 15 database is never its upgrade.
    record_in_store(&server, 16, CATALOG_16, OTHER_SYSTEM_ID);

    db.start(on_db);
    let message = refused(&db).await;
    println!("refused: {message}");
    assert!(
        message.contains("another PostgreSQL 16 database"),
        "why it is kept: {message}"
    );
    assert_eq!(recorded(&db).await, [("16".to_owned(), OTHER_SYSTEM_ID)]);
    db.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clusters_stanza_of_the_same_major_is_not_taken_over() {
    let (server, _cluster, first, _) = stopped_after_creating_its_stanza().await;
    let first_id = recorded(&first).await;
    assert_eq!(first_id.len(), 1, "{first_id:?}");

    // A cluster made afresh under the same name, on the same repository
    // path: its own database (its own system identifier).
    let mut cluster = TestCluster::new();
    let (mut other, on_other) = archiving_instance(&mut cluster, &server);
    other.start(on_other);
    let message = refused(&other).await;
    println!("refused: {message}");
    assert!(
        message.contains("another PostgreSQL 15 database"),
        "why it is kept: {message}"
    );
    let other_id = system_id(&other.superuser().await).await;
    assert_ne!(first_id[0].1, other_id);
    assert_eq!(recorded(&other).await, first_id, "the history is unchanged");
    other.stop(Duration::from_secs(30)).await;
}
