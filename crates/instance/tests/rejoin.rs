//! A former primary rejoins its new primary without losing data on a
//! guess: a rewind that fails for a moment is retried, and nothing is
//! re-cloned or moved aside; the WAL of the write the rewind undoes is
//! kept beside the data, where pg_waldump reads it.

mod common;

use std::time::{Duration, Instant};

use common::{TestCluster, desired, init_logs};
use tusk_api::instance::InstanceRole;
use tusk_instance::context::InstanceContext;
use tusk_instance::rewind::{self, RejoinMethod};

const STARTUP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_that_fails_for_a_moment_is_retried_without_a_fresh_clone() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    let on_a = desired("db-1", a.address);
    a.start(on_a.clone());
    a.wait_status("a ready primary", STARTUP, |r| r.ready).await;
    a.app()
        .await
        .batch_execute(
            "CREATE TABLE t (id int primary key); INSERT INTO t SELECT generate_series(1, 50)",
        )
        .await
        .expect("rows");
    b.start(on_a);
    b.wait_status("a streaming replica", STARTUP, |r| r.ready)
        .await;
    a.wait_status("the standby caught up", Duration::from_secs(20), |r| {
        r.standbys.len() == 1 && r.standbys[0].replay_lsn == r.current_lsn
    })
    .await;

    // db-2 is promoted while db-1 still runs and takes a write db-2 never
    // sees: db-1 has diverged and needs a rewind.
    let on_b = desired("db-2", b.address);
    b.set_desired(on_b.clone());
    b.wait_status("db-2 promoted", Duration::from_secs(60), |r| {
        r.role == InstanceRole::Primary && r.ready
    })
    .await;
    a.app()
        .await
        .batch_execute("INSERT INTO t VALUES (999)")
        .await
        .expect("a write only the former primary has");
    // Lost as a crashed node is: not shut down cleanly (pg_rewind then
    // needs crash recovery first).
    a.crash().await;

    // The new primary is away when the rewind starts, and back soon.
    b.stop(Duration::from_secs(30)).await;
    let ctx = InstanceContext::new(a.settings.clone()).expect("context");
    let (target, address) = (on_b.clone(), b.address);
    let started = Instant::now();
    let rejoin = tokio::spawn(async move { rewind::rejoin(&ctx, &target, address).await });
    tokio::time::sleep(Duration::from_secs(2)).await;
    b.start(on_b.clone());
    b.wait_status("db-2 back as primary", STARTUP, |r| {
        r.role == InstanceRole::Primary && r.ready
    })
    .await;
    let method = rejoin
        .await
        .expect("the rejoin task")
        .expect("the rewind succeeds once the primary is back");
    println!(
        "rewind retried until the primary was back: {:?}",
        started.elapsed()
    );
    assert_eq!(method, RejoinMethod::Rewound);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the first attempt met a primary that was away"
    );
    assert!(
        !a.settings.pgdata.with_file_name("pgdata.replaced").exists(),
        "no fresh clone replaced the data"
    );

    // The rewound instance follows the new primary; the diverged write is
    // undone and every other row is there.
    a.start(on_b);
    let report = a
        .wait_status("db-1 streaming from db-2", STARTUP, |r| {
            r.ready && r.timeline == Some(2)
        })
        .await;
    assert_eq!(report.role, InstanceRole::Replica);
    assert_eq!(report.kept_copy, None);
    let kept = a.settings.pgdata.with_file_name("pgdata.diverged");
    assert_eq!(report.kept_wal, Some(kept.display().to_string()));
    assert_diverged_write_kept(&a.settings, &kept);
    let ids: Vec<i32> = a
        .app()
        .await
        .query("SELECT id FROM t ORDER BY id", &[])
        .await
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, (1..=50).collect::<Vec<i32>>());
    a.stop(Duration::from_secs(30)).await;
    b.stop(Duration::from_secs(30)).await;
}

/// The folder the rewind kept under `kept` (named for the timeline and
/// position where the histories parted) holds, from that position on, the
/// former primary's diverged insert and its commit.
fn assert_diverged_write_kept(
    settings: &tusk_instance::settings::Settings,
    kept: &std::path::Path,
) {
    let folders: Vec<std::path::PathBuf> = std::fs::read_dir(kept)
        .expect("the kept WAL")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(folders.len(), 1, "one rewind, one copy: {folders:?}");
    let name = folders[0]
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    let [timeline, high, low] = name.split('-').collect::<Vec<_>>()[..] else {
        panic!("the copy's name is <timeline>-<lsn>: {name}");
    };
    assert_eq!(timeline, "00000001", "the old timeline");
    let output = std::process::Command::new(settings.binary("pg_waldump"))
        .arg("--path")
        .arg(&folders[0])
        .args(["--timeline", "1", "--start", &format!("{high}/{low}")])
        .output()
        .expect("pg_waldump runs");
    // pg_waldump ends with an error at the end of the copied WAL.
    let records = String::from_utf8_lossy(&output.stdout);
    assert!(
        records.contains("desc: INSERT") && records.contains("desc: COMMIT"),
        "the diverged write in the kept WAL:\n{records}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
