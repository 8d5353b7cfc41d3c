//! Base backups with real parts: PostgreSQL, pgBackRest and an
//! S3-compatible server over HTTPS (issue 16). The primary takes the
//! backup it is assigned and reports pgBackRest's record of it; a manager
//! restarted with the same assignment reports the backup already in the
//! repository instead of taking a second one; a standby refuses; a new
//! cluster restored to a moment has exactly the rows committed before it.
//! A restore rehearsal of the newest backup passes every check, and fails
//! naming the restore check when a byte of a backup file in the
//! repository was flipped. Retention (`spec.backup.retentionDays`, as the
//! manager renders it) keeps every backup inside the window and expires
//! an older full one only once a newer one covers the window, with the
//! WAL before it: pgBackRest's expire is run days ahead with libfaketime.
//! A directory on a volume serves as the repository as well as S3 does.

mod common;

use std::time::Duration;

use common::backups::{
    WAIT, archive_back_up_and_restore, assigned, finished, listed, primary_archiving_to, rows, take,
};
use common::stores::S3Server;
use common::{TestCluster, TestInstance, desired};
use tusk_api::rehearsal::Check;
use tusk_api::v1alpha1::{BackupPhase, BackupType};
use tusk_instance::context::InstanceContext;
use tusk_instance::desired::{DesiredState, RestoreSource};
use tusk_postgres::pgbackrest;

const BUCKET: &str = "backups";

/// A new S3 server, and `db-1` running as a primary archiving to it with
/// its stanza created and `data` (SQL) written; the desired state it runs
/// with, and a superuser session.
struct Archiving {
    server: S3Server,
    _cluster: TestCluster,
    db: TestInstance,
    on_db: DesiredState,
    client: tokio_postgres::Client,
}

async fn archiving_primary(data: &str) -> Archiving {
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let mut cluster = TestCluster::new();
    let mut repository = server.repository(BUCKET, "tusk");
    repository.retention_days = Some(7);
    let (db, on_db, client) =
        primary_archiving_to(&mut cluster, repository, Some(server.keys()), data).await;
    Archiving {
        server,
        _cluster: cluster,
        db,
        on_db,
        client,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_takes_its_assigned_backup_once_and_reports_it() {
    let Archiving {
        server: _server,
        _cluster,
        mut db,
        on_db,
        client: _client,
    } = archiving_primary("CREATE TABLE t AS SELECT generate_series(1, 10000) AS v").await;

    // A full backup, recorded as pgBackRest records it.
    let full = take(&mut db, &on_db, "nightly-1", BackupType::Full).await;
    let status = &full.status;
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{status:?}");
    let id = status.backup_id.clone().expect("an id");
    assert!(id.ends_with('F'), "a full backup's label: {id}");
    assert!(
        status.begin_lsn.is_some() && status.end_lsn.is_some(),
        "{status:?}"
    );
    assert_eq!(status.timeline, Some(1));
    assert!(status.size_bytes.is_some_and(|n| n > 0), "{status:?}");
    assert_eq!(status.instance.as_deref(), Some("db-1"));
    let location = status.location.clone().expect("location");
    assert!(
        location.starts_with("s3://backups/tusk/default/db/backup/db/") && location.ends_with(&id),
        "{location}"
    );
    assert!(status.started_at <= status.completed_at, "{status:?}");

    // An incremental one builds on it.
    let incremental = take(&mut db, &on_db, "hourly-1", BackupType::Incremental).await;
    let incremental_id = incremental.status.backup_id.clone().expect("an id");
    assert!(incremental_id.ends_with('I'), "{incremental:?}");
    assert_eq!(listed(&db).await.len(), 2);

    // A manager restarted while the assignment stands reports the backup
    // already taken, and takes no second one.
    db.stop(Duration::from_secs(30)).await;
    db.start(DesiredState {
        backup: Some(assigned(&db, "hourly-1", BackupType::Incremental)),
        ..on_db.clone()
    });
    let again = finished(&db, "hourly-1").await;
    assert_eq!(again.status.backup_id, Some(incremental_id));
    let listed = listed(&db).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        listed
            .iter()
            .filter_map(|b| b.annotation.clone())
            .collect::<Vec<_>>(),
        ["nightly-1", "hourly-1"]
    );
    db.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_refuses_a_backup_that_names_no_server_of_the_primary() {
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let mut cluster = TestCluster::new();
    let mut db1 = cluster.instance("db-1");
    let mut db2 = cluster.instance("db-2");
    db1.start(desired("db-1", db1.address));
    db1.wait_status("a ready primary", WAIT, |r| r.ready).await;
    db2.settings.repository_keys = Some(server.keys());
    let on_db2 = DesiredState {
        archiving: Some(server.repository(BUCKET, "tusk")),
        backup: Some(assigned(&db2, "b", BackupType::Full)),
        ..desired("db-1", db1.address)
    };
    db2.start(on_db2);
    let refused = finished(&db2, "b").await;
    assert_eq!(refused.status.phase, Some(BackupPhase::Failed));
    let error = refused.status.error.unwrap_or_default();
    // A standby backs up only through the primary's pgBackRest server,
    // which the operator names in the assignment (here it named none).
    assert!(
        error.contains("db-2 is a standby and the assignment names no pgBackRest server"),
        "{error}"
    );
    db2.stop(Duration::from_secs(30)).await;
    db1.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_to_a_time_has_every_row_committed_before_it_and_none_after() {
    let Archiving {
        server,
        _cluster: mut cluster,
        mut db,
        on_db,
        client,
    } = archiving_primary("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await;
    let base = take(&mut db, &on_db, "base", BackupType::Full).await;
    assert_eq!(base.status.phase, Some(BackupPhase::Completed), "{base:?}");

    // Committed after the backup and before the target: restored from WAL.
    client
        .batch_execute("INSERT INTO t SELECT generate_series(101, 200)")
        .await
        .expect("before the target");
    let target: String = client
        .query_one(
            "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            &[],
        )
        .await
        .expect("the target time")
        .get(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    client
        .batch_execute("INSERT INTO t SELECT generate_series(201, 300)")
        .await
        .expect("after the target");
    db.switch_wal_until_archived(&client, WAIT).await;
    assert_eq!(rows(&db).await, (300, Some(300)));

    // A new cluster restored from db's repository to the target.
    let mut copy = cluster.instance("copy-1");
    copy.settings.cluster_name = "copy".into();
    copy.settings.source_keys = Some(server.keys());
    copy.settings.repository_keys = Some(server.keys());
    copy.start(DesiredState {
        archiving: Some(server.repository(BUCKET, "tusk")),
        restore: Some(RestoreSource {
            repository: server.repository(BUCKET, "tusk"),
            namespace: "default".into(),
            cluster: "db".into(),
            target: pgbackrest::RecoveryTarget::Time(target.clone()),
        }),
        ..desired("copy-1", copy.address)
    });
    copy.wait_status("the restored primary, archiving", WAIT, |r| {
        r.ready && r.archiving.as_ref().is_some_and(|a| a.stanza_created)
    })
    .await;
    assert_eq!(rows(&copy).await, (200, Some(200)), "target {target}");
    // It is a primary of its own, on a new timeline, and its passwords
    // are its own (the superuser connected with them above).
    let report = copy.status().await;
    assert_eq!(report.role, tusk_api::instance::InstanceRole::Primary);
    assert!(report.timeline.is_some_and(|t| t >= 2), "{report:?}");
    let settings: Vec<String> = copy
        .superuser()
        .await
        .query(
            "SELECT name FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf'",
            &[],
        )
        .await
        .expect("settings")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(settings.is_empty(), "recovery settings left: {settings:?}");
    // The source's repository still lists only its own backup.
    assert_eq!(listed(&db).await.len(), 1);
    copy.stop(Duration::from_secs(30)).await;
    db.stop(Duration::from_secs(30)).await;
}

/// A restore to a time later than anything archived cannot end: the new
/// instance says so, with the newest time the archive reaches, instead of
/// only that PostgreSQL stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_to_a_time_past_the_archive_names_the_newest_archived_time() {
    let Archiving {
        server,
        _cluster: mut cluster,
        mut db,
        on_db,
        client,
    } = archiving_primary("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await;
    let base = take(&mut db, &on_db, "base", BackupType::Full).await;
    assert_eq!(base.status.phase, Some(BackupPhase::Completed), "{base:?}");
    client
        .batch_execute("INSERT INTO t SELECT generate_series(101, 200)")
        .await
        .expect("after the backup");
    db.switch_wal_until_archived(&client, WAIT).await;

    // An hour ahead: past every archived transaction.
    let target = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(1))
        .expect("an hour ahead")
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let target = target.as_str();
    let mut copy = cluster.instance("copy-1");
    copy.settings.cluster_name = "copy".into();
    copy.settings.source_keys = Some(server.keys());
    copy.settings.repository_keys = Some(server.keys());
    copy.start(DesiredState {
        archiving: Some(server.repository(BUCKET, "tusk")),
        restore: Some(RestoreSource {
            repository: server.repository(BUCKET, "tusk"),
            namespace: "default".into(),
            cluster: "db".into(),
            target: pgbackrest::RecoveryTarget::Time(target.into()),
        }),
        ..desired("copy-1", copy.address)
    });
    let report = copy
        .wait_status("the restore's failure explained", WAIT, |r| {
            r.last_error
                .as_deref()
                .is_some_and(|e| e.contains(tusk_postgres::recovery_log::TARGET_PAST_ARCHIVE))
        })
        .await;
    let told = report.last_error.unwrap_or_default();
    println!("{told}");
    assert!(told.contains(target), "{told}");
    // The newest archived transaction's time, today's date.
    let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
    assert!(told.contains(&format!("committed at {today}")), "{told}");
    copy.stop(Duration::from_secs(30)).await;
    db.stop(Duration::from_secs(30)).await;
}

/// The same cycle on a directory of a volume (pgBackRest's posix
/// repository) instead of an object store: a primary archives and backs
/// up there, and a new cluster restored from it has every row, then
/// archives to its own path on the same volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_repository_archives_backs_up_and_restores() {
    common::init_logs();
    let volume = common::shared_volume();
    let root = volume.path().display().to_string();
    let repository =
        || pgbackrest::Repository::parse("file:///pg", None, None, Some(&root)).expect("a volume");
    let label =
        archive_back_up_and_restore(repository, None, "file:///pg/default/db/backup/db/").await;
    let stanzas = volume.path().join("pg/default");
    assert!(
        stanzas.join("db/backup/db").join(&label).is_dir(),
        "the backup lies on the volume"
    );
    assert!(
        stanzas.join("copy/archive/copy").is_dir(),
        "the restored cluster archives to its own path"
    );
}

/// Flips one byte in the middle of the largest data file of `label` in
/// the repository (through the S3 API, as bit rot in the object store
/// would); the object's key.
fn flip_a_byte(server: &S3Server, label: &str) -> String {
    const FLIP: &str = r#"
import json, sys
import boto3
a = json.loads(sys.argv[1])
s3 = boto3.client("s3", endpoint_url="https://%s:%d" % (a["host"], a["port"]),
                  region_name=a["region"], aws_access_key_id=a["key"],
                  aws_secret_access_key=a["secret"], verify=a["ca"])
keys = []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=a["bucket"], Prefix="tusk/"):
    keys += [(o["Size"], o["Key"]) for o in page.get("Contents", [])
             if "/" + a["label"] + "/pg_data/" in o["Key"]]
size, key = max(keys)
body = bytearray(s3.get_object(Bucket=a["bucket"], Key=key)["Body"].read())
body[len(body) // 2] ^= 0xFF
s3.put_object(Bucket=a["bucket"], Key=key, Body=bytes(body))
print(key)
"#;
    let served = &server.served;
    let args = serde_json::json!({
        "host": served.host, "port": served.port, "region": served.region,
        "key": served.access_key_id, "secret": served.secret_access_key,
        "ca": served.ca_file, "bucket": BUCKET, "label": label,
    });
    let output = std::process::Command::new("python3")
        .args(["-c", FLIP, &args.to_string()])
        .output()
        .expect("python3 runs (scripts/setup installs boto3 with moto)");
    assert!(
        output.status.success(),
        "flipping a byte failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rehearsal_proves_the_newest_backup_and_names_the_check_that_fails() {
    let Archiving {
        server,
        _cluster: mut cluster,
        mut db,
        on_db,
        client,
    } = archiving_primary(
        "CREATE TABLE t (v int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 1000)",
    )
    .await;
    let taken = take(&mut db, &on_db, "nightly", BackupType::Full).await;
    assert_eq!(
        taken.status.phase,
        Some(BackupPhase::Completed),
        "{taken:?}"
    );
    let label = taken.status.backup_id.clone().expect("its id");

    // A scratch instance of the same cluster, as the rehearsal pod is.
    let mut scratch = cluster.instance("db-rehearsal");
    scratch.settings.repository_keys = Some(server.keys());
    let ctx = InstanceContext::new(scratch.settings.clone()).expect("context");
    let passed = tusk_instance::rehearsal::rehearse(&ctx, &on_db).await;
    println!("rehearsal: {passed:?}");
    assert!(passed.succeeded(), "{passed:?}");
    assert_eq!(passed.backup_id.as_deref(), Some(label.as_str()));
    assert_eq!(passed.backup.as_deref(), Some("nightly"));
    assert!(
        passed.message.contains("sentinel present") && passed.message.contains("pg_amcheck clean"),
        "{}",
        passed.message
    );
    assert!(passed.recovery_point.is_some(), "{passed:?}");
    assert!(
        !ctx.settings.staging_dir().exists(),
        "the restored copy is removed"
    );

    // The sentinel check itself, on the primary: the backup's row is
    // there, another backup's is not (a restore that lost it fails so).
    tusk_instance::sentinel::check(&client, "nightly")
        .await
        .expect("the sentinel of nightly");
    let missing = tusk_instance::sentinel::check(&client, "weekly")
        .await
        .expect_err("no sentinel for weekly");
    assert!(missing.contains("weekly"), "{missing}");

    // A byte of a backup file flipped in the repository.
    let key = flip_a_byte(&server, &label);
    let corrupt = tusk_instance::rehearsal::rehearse(&ctx, &on_db).await;
    println!("after flipping a byte of {key}: {corrupt:?}");
    assert_eq!(corrupt.failed_check, Some(Check::Restore), "{corrupt:?}");
    assert_eq!(corrupt.backup_id.as_deref(), Some(label.as_str()));
    db.stop(Duration::from_secs(30)).await;
}

/// libfaketime, which `scripts/setup` installs.
fn faketime_library() -> String {
    let found = std::fs::read_dir("/usr/lib")
        .expect("/usr/lib")
        .filter_map(Result::ok)
        .map(|dir| dir.path().join("faketime/libfaketime.so.1"))
        .find(|path| path.exists());
    found
        .expect("libfaketime is installed (scripts/setup)")
        .display()
        .to_string()
}

/// pgBackRest's expire with the manager's configuration, run `ahead`
/// (libfaketime's `+36h` form) of now; what `info` lists after it, and the
/// oldest WAL segment the archive keeps.
async fn expire_ahead(db: &TestInstance, ahead: &str) -> (Vec<String>, String) {
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    let config = ctx.pgbackrest_config();
    let library = faketime_library();
    let mut env = ctx.pgbackrest_env();
    env.extend([("LD_PRELOAD", library.as_str()), ("FAKETIME", ahead)]);
    let invocation = tusk_instance::archiving::Invocation {
        config: &config,
        stanza: &ctx.settings.cluster_name,
        env,
    };
    tusk_instance::archiving::run_with(&ctx, &invocation, &["expire"], WAIT)
        .await
        .unwrap_or_else(|e| panic!("expire {ahead}: {e}"));
    let json = tusk_instance::archiving::run(&ctx, &["info", "--output=json"], WAIT)
        .await
        .expect("pgbackrest info");
    let labels = pgbackrest::parse_info(&json, &ctx.settings.cluster_name)
        .expect("info")
        .into_iter()
        .map(|b| b.label)
        .collect();
    let info: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let oldest_wal = info[0]["archive"][0]["min"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (labels, oldest_wal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_the_window_and_expires_a_full_backup_only_once_a_newer_one_covers_it() {
    let Archiving {
        server: _server,
        _cluster,
        mut db,
        mut on_db,
        client,
    } = archiving_primary("CREATE TABLE t AS SELECT generate_series(1, 1000) AS v").await;
    // spec.backup.retentionDays: 1.
    if let Some(repository) = on_db.archiving.as_mut() {
        repository.retention_days = Some(1);
    }
    let mut ids = Vec::new();
    for name in ["full-1", "full-2"] {
        db.set_desired(DesiredState {
            backup: Some(assigned(&db, name, BackupType::Full)),
            ..on_db.clone()
        });
        let taken = finished(&db, name).await;
        assert_eq!(
            taken.status.phase,
            Some(BackupPhase::Completed),
            "{taken:?}"
        );
        ids.push(taken.status.backup_id.expect("an id"));
        client
            .batch_execute(
                "INSERT INTO t SELECT generate_series(1001, 2000); SELECT pg_switch_wal()",
            )
            .await
            .expect("more WAL");
    }
    let begin_wal = |id: &str| {
        let id = id.to_owned();
        let db = &db;
        async move {
            listed(db)
                .await
                .into_iter()
                .find(|b| b.label == id)
                .and_then(|b| b.begin_wal)
                .expect("the backup's first segment")
        }
    };
    let (first_wal, second_wal) = (begin_wal(&ids[0]).await, begin_wal(&ids[1]).await);

    // Half a day on, both are inside the one-day window: kept, with the WAL
    // from the first on.
    let (kept, oldest) = expire_ahead(&db, "+12h").await;
    assert_eq!(kept, ids, "nothing expires inside the window");
    assert!(oldest <= first_wal, "{oldest} > {first_wal}");

    // A day and a half on, both are older than the window: the newer one
    // alone covers its start, so the older one goes, with the WAL before
    // the newer one.
    let (kept, oldest) = expire_ahead(&db, "+36h").await;
    assert_eq!(kept, ids[1..], "the older full backup expires");
    assert!(
        oldest > first_wal && oldest <= second_wal,
        "the archive keeps what the newer backup needs: {oldest} ({first_wal} .. {second_wal})"
    );
    db.stop(Duration::from_secs(30)).await;
}
