//! What the backup tests share: a primary archiving to a repository, a
//! backup assigned and awaited, pgBackRest's list of backups, and the
//! whole cycle (archive, back up, restore into a new cluster) on any
//! repository.

use std::time::Duration;

use tusk_api::contract::RepositoryKeys;
use tusk_api::instance::{BackupReport, InstanceReport};
use tusk_api::v1alpha1::{BackupAssignment, BackupPhase, BackupType};
use tusk_instance::context::InstanceContext;
use tusk_instance::desired::{DesiredState, RestoreSource};
use tusk_postgres::pgbackrest;

use super::{TestCluster, TestInstance, desired};

/// Bound on each wait: the stanza, then a backup of a small database
/// (seconds, once PostgreSQL's checkpoint is done).
pub const WAIT: Duration = Duration::from_secs(180);

/// The assignment of backup `name` of `backup_type` to `db`.
pub fn assigned(db: &TestInstance, name: &str, backup_type: BackupType) -> BackupAssignment {
    BackupAssignment {
        backup: name.to_owned(),
        instance: db.settings.pod_name.clone(),
        backup_type,
        primary_server: None,
    }
}

/// The report of backup `name`, if `report` has it.
pub fn backup(report: &InstanceReport, name: &str) -> Option<BackupReport> {
    report.backup.clone().filter(|b| b.name == name)
}

/// `db-1` of `cluster` running as a primary archiving to `repository`
/// (with `keys`), its stanza created and `data` (SQL) written; the
/// desired state it runs with, and a superuser session.
pub async fn primary_archiving_to(
    cluster: &mut TestCluster,
    repository: pgbackrest::Repository,
    keys: Option<tusk_api::contract::RepositoryKeys>,
    data: &str,
) -> (TestInstance, DesiredState, tokio_postgres::Client) {
    let mut db = cluster.instance("db-1");
    db.settings.repository_keys = keys;
    let on_db = DesiredState {
        archiving: Some(repository),
        ..desired("db-1", db.address)
    };
    db.start(on_db.clone());
    db.wait_status("the stanza", WAIT, |r| {
        r.ready && r.archiving.as_ref().is_some_and(|a| a.stanza_created)
    })
    .await;
    let client = db.superuser().await;
    client.batch_execute(data).await.expect("data");
    (db, on_db, client)
}

/// Assigns `db` (running `on_db`) backup `name` of `backup_type`; its
/// report once finished.
pub async fn take(
    db: &mut TestInstance,
    on_db: &DesiredState,
    name: &str,
    backup_type: BackupType,
) -> BackupReport {
    db.set_desired(DesiredState {
        backup: Some(assigned(db, name, backup_type)),
        ..on_db.clone()
    });
    finished(db, name).await
}

/// The report of backup `name` once it finished.
pub async fn finished(db: &TestInstance, name: &str) -> BackupReport {
    let report = db
        .wait_status(&format!("backup {name} finished"), WAIT, |r| {
            backup(r, name).is_some_and(|b| b.status.finished())
        })
        .await;
    backup(&report, name).expect("the backup")
}

/// The backups pgBackRest lists for the stanza.
pub async fn listed(db: &TestInstance) -> Vec<pgbackrest::BackupInfo> {
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    let json = tusk_instance::archiving::run(&ctx, &["info", "--output=json"], WAIT)
        .await
        .expect("pgbackrest info");
    pgbackrest::parse_info(&json, &ctx.settings.cluster_name).expect("info")
}

/// Rows of `t` on `db`: how many, and the largest.
pub async fn rows(db: &TestInstance) -> (i64, Option<i32>) {
    let row = db
        .superuser()
        .await
        .query_one("SELECT count(*), max(v) FROM t", &[])
        .await
        .expect("count");
    (row.get(0), row.get(1))
}

/// The whole cycle on `repository` (signed in to with `keys`): `db-1`
/// archives there and takes a full backup, whose location starts with
/// `location`; rows written after it are archived; a new cluster `copy`
/// restored from the repository has every row, then archives to its own
/// path (its stanza created there), and the source's backups stay its
/// own. The backup's id.
pub async fn archive_back_up_and_restore(
    repository: impl Fn() -> pgbackrest::Repository,
    keys: Option<RepositoryKeys>,
    location: &str,
) -> String {
    let mut cluster = TestCluster::new();
    let (mut db, on_db, client) = primary_archiving_to(
        &mut cluster,
        repository(),
        keys.clone(),
        "CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)",
    )
    .await;
    let base = take(&mut db, &on_db, "base", BackupType::Full).await;
    assert_eq!(base.status.phase, Some(BackupPhase::Completed), "{base:?}");
    let found = base.status.location.clone().unwrap_or_default();
    assert!(found.starts_with(location), "{found} is under {location}");
    let label = base.status.backup_id.clone().expect("an id");
    client
        .batch_execute("INSERT INTO t SELECT generate_series(101, 200)")
        .await
        .expect("after the backup");
    db.switch_wal_until_archived(&client, WAIT).await;

    let mut copy = cluster.instance("copy-1");
    copy.settings.cluster_name = "copy".into();
    copy.settings.repository_keys = keys.clone();
    copy.settings.source_keys = keys;
    copy.start(DesiredState {
        archiving: Some(repository()),
        restore: Some(RestoreSource {
            repository: repository(),
            namespace: "default".into(),
            cluster: "db".into(),
            target: pgbackrest::RecoveryTarget::Latest,
        }),
        ..desired("copy-1", copy.address)
    });
    copy.wait_status("the restored primary, archiving", WAIT, |r| {
        r.ready && r.archiving.as_ref().is_some_and(|a| a.stanza_created)
    })
    .await;
    assert_eq!(rows(&copy).await, (200, Some(200)));
    let listed = listed(&db).await;
    assert_eq!(listed.len(), 1, "the source's backups are its own");
    assert_eq!(listed[0].label, label);
    copy.stop(Duration::from_secs(30)).await;
    db.stop(Duration::from_secs(30)).await;
    label
}

/// `db-1` of `cluster` started as a primary archiving to `repository`
/// with `keys`, which the store refuses: once the stanza's failure is
/// reported (bounded), the instance and the report's message, which
/// never holds `secret`.
pub async fn refused(
    cluster: &mut TestCluster,
    repository: pgbackrest::Repository,
    keys: Option<RepositoryKeys>,
    secret: &str,
) -> (TestInstance, String) {
    let mut db = cluster.instance("db-1");
    db.settings.repository_keys = keys;
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
    let message = failure.message.expect("message");
    assert!(!message.contains(secret), "no key in the message");
    (db, message)
}

/// A segment `db` finishes while its store refuses it is reported as
/// failing and kept in `pg_wal`; `db` is stopped.
pub async fn refused_segment_is_kept(mut db: TestInstance) {
    let segment = db.finish_a_segment().await;
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
