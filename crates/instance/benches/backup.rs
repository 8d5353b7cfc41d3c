//! Backup, restore, restore rehearsal and upgrade pre-check of a database
//! of about 1 GiB (with the cost of a major upgrade's pre-check), printed as figures beside a plain copy of the same data
//! directory in the same run (not a timed test):
//!
//! ```sh
//! scripts/setup      # PostgreSQL, pgBackRest, moto, PostgreSQL 17
//! cargo bench -p tusk-instance --bench backup [-- SCALE [random] [volume]]
//! ```
//!
//! A PostgreSQL 15 instance run by the instance manager archives to the
//! tests' S3-compatible server (`scripts/s3-test-server`: moto over HTTPS
//! on loopback, objects in memory), or with `volume` to a directory on
//! the local disk (a `file://` repository, pgBackRest's `posix` type, as a
//! mounted volume holds it), and is filled by `pgbench -i` (scale 68
//! by default, about 1 GiB), or with `random`, by as many MiB of random
//! bytes (15 MiB a scale unit), which no compression shrinks (pgbench's
//! rows are mostly padding, which zstd shrinks to a few percent). Then,
//! each timed on its own:
//!
//! 1. a copy of the data directory without `pg_wal` (what a backup
//!    copies; the archive holds the WAL) with `tar` and `sync`: the plain
//!    copy;
//! 2. a full backup, as the operator assigns it (pgBackRest, `zst`);
//! 3. `pgbackrest restore` of it into an empty directory;
//! 4. the restore rehearsal (restore, replay, sentinel, `pg_amcheck
//!    --heapallindexed`), as its pod runs it;
//! 5. the major upgrade's pre-check to 17 (restore, replay, `pg_upgrade
//!    --check`), as its pod runs it.
//!
//! The object store is moto, one Python process: the figures say what
//! these take against it, and the ratios to the copy how far that is from
//! the disk's speed; a real object store is faster at many files in
//! parallel.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::stores::S3Server;
use common::{SUPERUSER_PASSWORD, TestCluster, desired};
use tusk_api::v1alpha1::{BackupAssignment, BackupPhase, BackupType};
use tusk_instance::context::InstanceContext;
use tusk_instance::desired::DesiredState;
use tusk_instance::major_upgrade::precheck::PreCheck;
use tusk_postgres::pgbackrest::{self, RecoveryTarget};

const BUCKET: &str = "bench";
const WAIT: Duration = Duration::from_secs(1800);

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let scale: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(68);
    let random = args.iter().any(|a| a == "random");
    let volume = args.iter().any(|a| a == "volume");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(bench(scale, random, volume));
}

/// Fills the database: `pgbench -i` at `scale`, or 15 MiB of random bytes
/// a scale unit; how long it took.
async fn fill(db: &common::TestInstance, scale: u32, random: bool) -> Duration {
    let started = Instant::now();
    if random {
        // 512 random bytes a row (32 MD5 sums of random numbers), 2,048
        // rows a MiB, in batches of 16 MiB.
        let client = db.superuser().await;
        client
            .batch_execute("CREATE TABLE noise (b bytea)")
            .await
            .expect("table");
        let rows = u64::from(scale) * 15 * 2048;
        let mut done = 0;
        while done < rows {
            let batch = (rows - done).min(16 * 2048);
            client
                .batch_execute(&format!(
                    "INSERT INTO noise SELECT (SELECT decode(string_agg(md5(random()::text || g || i), ''), \
                     'hex') FROM generate_series(1, 32) AS i) FROM generate_series(1, {batch}) AS g"
                ))
                .await
                .expect("random rows");
            done += batch;
        }
        return started.elapsed();
    }
    let (address, port) = (db.address.to_string(), db.port.to_string());
    timed_command(
        &format!("{}/pgbench", common::BIN_DIR),
        &[
            "--initialize",
            "--quiet",
            &format!("--scale={scale}"),
            "--host",
            &address,
            "--port",
            &port,
            "--username=postgres",
            "postgres",
        ],
        &[("PGPASSWORD", SUPERUSER_PASSWORD)],
    )
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Bytes under `dir`.
fn size_of(dir: &Path) -> u64 {
    let output = std::process::Command::new("du")
        .args(["-sb"])
        .arg(dir)
        .output()
        .expect("du runs");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_default()
}

/// Runs `program` with `args`, which must succeed; how long it took.
fn timed_command(program: &str, args: &[&str], env: &[(&str, &str)]) -> Duration {
    let started = Instant::now();
    let status = std::process::Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .status()
        .unwrap_or_else(|e| panic!("{program} cannot run: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
    started.elapsed()
}

/// The repository the bench archives to: moto's bucket, or a directory
/// of `volume`; the keys it needs.
fn repository(
    server: &S3Server,
    volume: &tempfile::TempDir,
    on_volume: bool,
) -> (
    pgbackrest::Repository,
    Option<tusk_api::contract::RepositoryKeys>,
) {
    if on_volume {
        let root = volume.path().display().to_string();
        let repository = pgbackrest::Repository::volume("file:///tusk", &root).expect("a volume");
        (repository, None)
    } else {
        (server.repository(BUCKET, "tusk"), Some(server.keys()))
    }
}

async fn bench(scale: u32, random: bool, on_volume: bool) {
    common::init_logs();
    let server = S3Server::start(&[BUCKET]);
    let volume = common::shared_volume();
    let (repository, keys) = repository(&server, &volume, on_volume);
    let store = if on_volume {
        "a directory on the local disk"
    } else {
        "the object store (moto)"
    };
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    db.settings.repository_keys = keys.clone();
    let on_db = DesiredState {
        archiving: Some(repository),
        ..desired("db-1", db.address)
    };
    db.start(on_db.clone());
    db.wait_status("the stanza", Duration::from_secs(300), |r| {
        r.ready && r.archiving.as_ref().is_some_and(|a| a.stanza_created)
    })
    .await;
    let loading = fill(&db, scale, random).await;
    let client = db.superuser().await;
    client
        .batch_execute("CHECKPOINT")
        .await
        .expect("checkpoint");
    let pgdata = db.settings.pgdata.clone();
    // What a backup copies: the data directory without its WAL (which the
    // archive holds).
    let data_bytes = size_of(&pgdata) - size_of(&pgdata.join("pg_wal"));
    let filled = if random {
        format!("{} MiB of random bytes", scale * 15)
    } else {
        format!("pgbench scale {scale}")
    };
    println!(
        "data directory without pg_wal: {:.0} MiB ({filled}, loaded in {:.1} s)",
        mib(data_bytes),
        loading.as_secs_f64()
    );

    // 1. The plain copy of the same files.
    let copy = tempfile::tempdir().expect("a directory for the copy");
    let script = format!(
        "tar -C '{}' --exclude=./pg_wal -cf - . | tar -C '{}' -xf - && sync",
        pgdata.display(),
        copy.path().display()
    );
    let copied = timed_command("sh", &["-c", &script], &[]);
    drop(copy);

    // 2. A full backup, as the operator assigns it.
    let started = Instant::now();
    db.set_desired(DesiredState {
        backup: Some(BackupAssignment {
            backup: "bench".to_owned(),
            instance: db.settings.pod_name.clone(),
            backup_type: BackupType::Full,
            primary_server: None,
        }),
        ..on_db.clone()
    });
    let report = db
        .wait_status("the backup", WAIT, |r| {
            r.backup.as_ref().is_some_and(|b| b.status.finished())
        })
        .await;
    let backed_up = started.elapsed();
    let status = report.backup.expect("the backup").status;
    assert_eq!(status.phase, Some(BackupPhase::Completed), "{status:?}");
    let stored = status.size_bytes.unwrap_or_default();

    // 3. pgbackrest restore into an empty directory.
    let ctx = InstanceContext::new(db.settings.clone()).expect("context");
    let restored_dir = db.root.path().join("restored");
    ctx.user
        .private_dir(&restored_dir)
        .expect("restore directory");
    let args =
        pgbackrest::restore_args(&restored_dir.display().to_string(), &RecoveryTarget::Latest);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    tusk_instance::archiving::run(&ctx, &args, WAIT)
        .await
        .expect("pgbackrest restore");
    let restored = started.elapsed();
    tusk_instance::datadir::remove_dir(&restored_dir).expect("restored copy removed");

    // 4. and 5. The rehearsal and the pre-check, each on a scratch
    // instance of the same cluster, as their pods are.
    let mut scratch = cluster.instance("db-scratch");
    scratch.settings.repository_keys = keys;
    let scratch_ctx = InstanceContext::new(scratch.settings.clone()).expect("context");
    let rehearsal = tusk_instance::rehearsal::rehearse(&scratch_ctx, &on_db).await;
    assert!(rehearsal.succeeded(), "{rehearsal:?}");
    let new_bin = tusk_postgres::version::local_bin_dir(17);
    let check = PreCheck {
        old_bin: common::BIN_DIR.into(),
        new_bin,
        new_major: 17,
        work_dir: scratch.settings.run_dir.join("upgrade"),
    };
    scratch_ctx
        .user
        .private_dir(&scratch.settings.run_dir)
        .expect("run directory");
    let prechecked = check.run(&scratch_ctx, &on_db).await;
    assert!(prechecked.failed_step.is_none(), "{prechecked:?}");
    db.stop(Duration::from_secs(60)).await;

    let rate = |took: Duration| mib(data_bytes) / took.as_secs_f64();
    let ratio = |took: Duration| took.as_secs_f64() / copied.as_secs_f64();
    println!("repository: {store}");
    println!("| step | time | MiB/s of the database files | time / plain copy |");
    println!("|---|---:|---:|---:|");
    for (step, took) in [
        ("plain copy (`tar`, `sync`)", copied),
        ("full backup", backed_up),
        ("`pgbackrest restore`", restored),
        (
            "restore rehearsal (restore, replay, checks)",
            Duration::from_secs_f64(rehearsal.duration_seconds),
        ),
        (
            "upgrade pre-check to 17 (restore, replay, `pg_upgrade --check`)",
            Duration::from_secs_f64(prechecked.duration_seconds),
        ),
    ] {
        println!(
            "| {step} | {:.1} s | {:.0} | {:.1} |",
            took.as_secs_f64(),
            rate(took),
            ratio(took)
        );
    }
    println!(
        "stored in the repository: {:.0} MiB ({:.0} % of the database files)",
        mib(stored.try_into().unwrap_or_default()),
        100.0 * stored as f64 / data_bytes as f64
    );
}
