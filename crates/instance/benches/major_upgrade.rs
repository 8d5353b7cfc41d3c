//! The downtime of a major upgrade with `pg_upgrade --link`, printed as
//! figures (not a timed test): a PostgreSQL 15
//! database of about 1 GiB (`pgbench -i`, scale 68 by default) is upgraded
//! to 17 with `tusk_instance::major_upgrade`, the steps the operator's
//! upgrade drives.
//!
//! ```sh
//! scripts/setup      # PostgreSQL 17 under /opt/tusk/postgresql
//! cargo bench -p tusk-instance --bench major_upgrade [-- SCALE [MAJOR]]
//! ```
//!
//! Writes stop at the old server's fast shutdown and resume when the new
//! server answers a query: that span (stop, `pg_upgrade --link`, start) is
//! the downtime. Preparing the new cluster happens before it; `--check` is
//! shown apart (the upgrade runs it in a pre-check); the statistics pass
//! runs while the new server already serves.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tusk_instance::major_upgrade::{MajorUpgrade, analyze};
use tusk_instance::process_user::ProcessUser;

const OLD_BIN: &str = "/usr/lib/postgresql/15/bin";
const PORT: u16 = 5432;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let scale: u32 = args.first().and_then(|a| a.parse().ok()).unwrap_or(68);
    let major: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(17);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(bench(scale, major));
}

async fn bench(scale: u32, major: u32) {
    let user = ProcessUser::detect("postgres").expect("the postgres user (scripts/setup)");
    let new_bin = tusk_postgres::version::local_bin_dir(major);
    assert!(
        new_bin.join("pg_upgrade").is_file(),
        "PostgreSQL {major} is not installed in {}: run scripts/setup",
        new_bin.display()
    );
    let root = tempfile::Builder::new()
        .prefix("tusk-bench-upgrade-")
        .tempdir()
        .expect("a temporary directory");
    user.private_dir(root.path())
        .expect("the directory given to postgres");
    let old_data = root.path().join("pgdata");
    let socket = root.path().join("socket");
    user.private_dir(&socket).expect("socket directory");
    let old_bin = PathBuf::from(OLD_BIN);

    let initdb: Vec<OsString> = vec![
        "--pgdata".into(),
        old_data.clone().into(),
        "--data-checksums".into(),
        "--encoding=UTF8".into(),
        "--locale=C".into(),
        "--auth-local=peer".into(),
        "--auth-host=scram-sha-256".into(),
        "--username=postgres".into(),
    ];
    run(&user, &old_bin.join("initdb"), initdb).await;
    start(&user, &old_bin, &old_data, &socket).await;
    let loading = Instant::now();
    let pgbench: Vec<OsString> = vec![
        "--initialize".into(),
        "--quiet".into(),
        format!("--scale={scale}").into(),
        "--host".into(),
        socket.clone().into(),
        format!("--port={PORT}").into(),
        "--username=postgres".into(),
        "postgres".into(),
    ];
    run(&user, &old_bin.join("pgbench"), pgbench).await;
    let size = query(
        &user,
        &old_bin,
        &socket,
        "select pg_database_size('postgres')",
    )
    .await;
    let size_mib = size.trim().parse::<f64>().unwrap_or(0.0) / 1024.0 / 1024.0;
    println!(
        "PostgreSQL 15 database: {size_mib:.0} MiB (pgbench scale {scale}), loaded in {:.1} s",
        loading.elapsed().as_secs_f64()
    );

    let upgrade = MajorUpgrade {
        old_bin: old_bin.clone(),
        new_bin: new_bin.clone(),
        new_major: major,
        new_data: root.path().join(format!("pgdata.{major}")),
        old_data: old_data.clone(),
        work_dir: root.path().join("upgrade"),
        superuser: "postgres".into(),
    };
    let prepared = timed(upgrade.prepare(&user)).await;

    let down = Instant::now();
    let stopped = timed(stop(&user, &old_bin, &old_data)).await;
    let checked = timed(upgrade.check(&user)).await;
    let linked = timed(upgrade.link(&user)).await;
    let started = timed(start(&user, &new_bin, &upgrade.new_data, &socket)).await;
    let first = timed(query(
        &user,
        &new_bin,
        &socket,
        "select count(*) from pgbench_branches",
    ))
    .await;
    let downtime = down.elapsed().as_secs_f64() - checked.1;
    let analyzed = timed(analyze(&user, &new_bin, &socket, PORT, "postgres")).await;
    let count = query(
        &user,
        &new_bin,
        &socket,
        "select count(*) from pgbench_accounts",
    )
    .await;
    stop(&user, &new_bin, &upgrade.new_data).await;

    checked.0.expect("pg_upgrade --check");
    linked.0.expect("pg_upgrade --link");
    analyzed.0.expect("vacuumdb --analyze-in-stages");
    prepared.0.expect("the new cluster prepared");
    assert_eq!(
        count.trim(),
        (u64::from(scale) * 100_000).to_string(),
        "every pgbench_accounts row upgraded"
    );
    println!("15 -> {major} with pg_upgrade --link, {size_mib:.0} MiB:");
    println!(
        "  prepare (initdb of {major}, before the downtime): {:.2} s",
        prepared.1
    );
    println!(
        "  pg_upgrade --check (a pre-check, not counted):   {:.2} s",
        checked.1
    );
    println!(
        "  fast shutdown of 15:                             {:.2} s",
        stopped.1
    );
    println!(
        "  pg_upgrade --link:                               {:.2} s",
        linked.1
    );
    println!(
        "  start of {major} (pg_ctl -w):                        {:.2} s",
        started.1
    );
    println!(
        "  first query:                                     {:.2} s",
        first.1
    );
    println!("  downtime (shutdown to first query, no check):    {downtime:.2} s");
    println!(
        "  analyze in stages (serving meanwhile):           {:.2} s",
        analyzed.1
    );
}

async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, f64) {
    let started = Instant::now();
    let value = work.await;
    (value, started.elapsed().as_secs_f64())
}

async fn run(user: &ProcessUser, program: &Path, args: Vec<OsString>) -> String {
    let output = user
        .command(program)
        .args(args)
        .output()
        .await
        .expect("the program runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{} failed: {text}",
        program.display()
    );
    text
}

async fn start(user: &ProcessUser, bin: &Path, data: &Path, socket: &Path) {
    let options = format!("-c listen_addresses='' -k {} -p {PORT}", socket.display());
    let args: Vec<OsString> = vec![
        "start".into(),
        "-w".into(),
        "-t".into(),
        "120".into(),
        "-D".into(),
        data.into(),
        "-o".into(),
        options.into(),
        "-l".into(),
        data.with_extension("log").into(),
    ];
    run(user, &bin.join("pg_ctl"), args).await;
}

async fn stop(user: &ProcessUser, bin: &Path, data: &Path) {
    let args: Vec<OsString> = vec![
        "stop".into(),
        "-m".into(),
        "fast".into(),
        "-w".into(),
        "-D".into(),
        data.into(),
    ];
    run(user, &bin.join("pg_ctl"), args).await;
}

async fn query(user: &ProcessUser, bin: &Path, socket: &Path, sql: &str) -> String {
    let args: Vec<OsString> = vec![
        "--no-psqlrc".into(),
        "--tuples-only".into(),
        "--no-align".into(),
        "--host".into(),
        socket.into(),
        format!("--port={PORT}").into(),
        "--username=postgres".into(),
        "--dbname=postgres".into(),
        "--command".into(),
        sql.into(),
    ];
    run(user, &bin.join("psql"), args).await
}
