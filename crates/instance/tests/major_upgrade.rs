//! Major-version upgrades with `pg_upgrade --link` (the upgrade's engine)
//! against real servers: a PostgreSQL 15 primary set up by the instance
//! manager (Tusk's own configuration and access rules), with rows, an
//! index, an extension and a view, upgraded to 17 and to 18 with every one
//! of them there after; an upgrade to 16, whose installation lacks the
//! extension, refused by the check with the library named and the old
//! cluster untouched, then done once the extension is gone.
//!
//! The newer majors come from `scripts/setup` (`/opt/tusk/postgresql`).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{
    BIN_DIR, TestInstance, desired, init_logs, installed_bin_dir as installed,
    postgres_user as user, stopped_primary_with,
};
use tokio_postgres::{Client, NoTls};
use tusk_instance::major_upgrade::{MajorUpgrade, UpgradeError, analyze};

const STARTUP: Duration = Duration::from_secs(60);
const ROWS: i64 = 20_000;
/// The temporary servers listen on a socket only; the port names it.
const SOCKET_PORT: u16 = 5432;

const DATA: &str = "create extension pg_trgm;
    create table orders (id int primary key, note text not null);
    insert into orders select i, 'order note ' || i from generate_series(1, 20000) i;
    create index orders_note on orders using gin (note gin_trgm_ops);
    create view late_orders as select * from orders where id > 15000;";

/// The superuser in the application's database, where `DATA` lives.
async fn superuser_in_app(db: &TestInstance) -> Client {
    db.connect("postgres", common::SUPERUSER_PASSWORD, "app")
        .await
        .expect("superuser in app")
}

fn upgrade_of(db: &TestInstance, major: u32) -> MajorUpgrade {
    let pgdata = db.settings.pgdata.clone();
    MajorUpgrade {
        old_bin: PathBuf::from(BIN_DIR),
        new_bin: installed(major),
        new_major: major,
        new_data: pgdata.with_file_name(format!("pgdata.{major}")),
        old_data: pgdata,
        work_dir: db.root.path().join("upgrade"),
        superuser: "postgres".into(),
    }
}

/// A server of `bin` on `data`, listening on a socket in `socket_dir`
/// only; stopped when dropped.
struct SocketServer {
    bin: PathBuf,
    data: PathBuf,
    socket_dir: PathBuf,
}

impl SocketServer {
    async fn start(bin: &Path, data: &Path, socket_dir: &Path) -> Self {
        let server = SocketServer {
            bin: bin.to_owned(),
            data: data.to_owned(),
            socket_dir: socket_dir.to_owned(),
        };
        let options = format!(
            "-c listen_addresses='' -k {} -p {SOCKET_PORT}",
            socket_dir.display()
        );
        let log = socket_dir.join("server.log");
        let output = user()
            .command(&bin.join("pg_ctl"))
            .args(["start", "-w", "-t", "60", "-D"])
            .arg(data)
            .args(["-o", &options, "-l"])
            .arg(&log)
            .output()
            .await
            .expect("pg_ctl runs");
        assert!(
            output.status.success(),
            "the upgraded server starts: {}{}",
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        server
    }

    async fn connect(&self, dbname: &str) -> Client {
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(&self.socket_dir)
            .port(SOCKET_PORT)
            .user("postgres")
            .dbname(dbname)
            .connect_timeout(Duration::from_secs(5))
            .connect(NoTls)
            .await
            .expect("a connection over the socket (peer, through the copied ident map)");
        tokio::spawn(connection);
        client
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        let user = user();
        let mut stop = std::process::Command::new(self.bin.join("pg_ctl"));
        stop.args(["stop", "-m", "fast", "-w", "-D"])
            .arg(&self.data);
        if nix::unistd::Uid::effective().is_root() {
            use std::os::unix::process::CommandExt;
            stop.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        let _ = stop.output();
    }
}

async fn count(client: &Client, query: &str) -> i64 {
    client
        .query_one(query, &[])
        .await
        .expect("a count")
        .get::<_, i64>(0)
}

/// Everything `DATA` made is there, and the index serves its query.
async fn data_is_intact(app: &Client, with_extension: bool) {
    assert_eq!(count(app, "select count(*) from orders").await, ROWS);
    assert_eq!(count(app, "select count(*) from late_orders").await, 5_000);
    if !with_extension {
        return;
    }
    assert_eq!(
        count(
            app,
            "select count(*) from pg_extension where extname = 'pg_trgm'"
        )
        .await,
        1
    );
    app.batch_execute("set enable_seqscan = off")
        .await
        .expect("set");
    let plan: Vec<String> = app
        .query(
            "explain select id from orders where note like '%note 1234%'",
            &[],
        )
        .await
        .expect("explain")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter().any(|line| line.contains("orders_note")),
        "the trigram index serves the query: {plan:#?}"
    );
    assert_eq!(
        count(
            app,
            "select count(*) from orders where note like '%note 1234%'"
        )
        .await,
        11,
        "1234 and 12340..12349"
    );
}

async fn upgrades_with_every_row_index_and_extension(major: u32) {
    init_logs();
    let db = stopped_primary_with(DATA).await;
    let upgrade = upgrade_of(&db, major);
    let user = user();
    upgrade.prepare(&user).await.expect("new cluster prepared");
    upgrade.check(&user).await.expect("compatible");
    let started = std::time::Instant::now();
    upgrade.link(&user).await.expect("upgraded");
    println!("pg_upgrade --link to {major}: {:?}", started.elapsed());
    assert!(
        upgrade.old_data.join("global/pg_control.old").exists(),
        "--link disables the old cluster until brought back"
    );

    let server = SocketServer::start(&upgrade.new_bin, &upgrade.new_data, &upgrade.work_dir).await;
    analyze(
        &user,
        &upgrade.new_bin,
        &upgrade.work_dir,
        SOCKET_PORT,
        "postgres",
    )
    .await
    .expect("statistics gathered");
    let app = server.connect("app").await;
    let version: String = app
        .query_one("show server_version", &[])
        .await
        .expect("version")
        .get(0);
    assert!(version.starts_with(&format!("{major}.")), "{version}");
    data_is_intact(&app, true).await;
    let analyzed = count(
        &app,
        "select count(*) from pg_stats where tablename = 'orders' and attname = 'note'",
    )
    .await;
    assert_eq!(analyzed, 1, "the planner has statistics again");
    // Tusk's roles came along.
    let roles = count(
        &app,
        "select count(*) from pg_roles where rolname in ('app', 'streaming_replica')",
    )
    .await;
    assert_eq!(roles, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_15_cluster_is_upgraded_to_17_with_every_row_index_and_extension() {
    upgrades_with_every_row_index_and_extension(17).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_15_cluster_is_upgraded_to_18_with_every_row_index_and_extension() {
    upgrades_with_every_row_index_and_extension(18).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_extension_fails_the_check_and_leaves_the_old_cluster_as_it_was() {
    init_logs();
    let mut db = stopped_primary_with(DATA).await;
    // The PostgreSQL 16 installation here carries no contrib modules.
    let upgrade = upgrade_of(&db, 16);
    let user = user();
    upgrade.prepare(&user).await.expect("new cluster prepared");
    let refused = upgrade.check(&user).await.expect_err("pg_trgm is missing");
    let UpgradeError::Failed { step, summary } = &refused else {
        panic!("a failed check, got {refused:?}");
    };
    assert_eq!(*step, "pg_upgrade");
    assert!(
        summary.contains("required libraries") && summary.contains("pg_trgm"),
        "the check and the library are named: {summary}"
    );
    println!("refused: {refused}");
    assert!(upgrade.old_data.join("global/pg_control").exists());

    // The old cluster serves as before.
    db.start(desired("db-1", db.address));
    db.wait_status("the old primary back", STARTUP, |r| r.ready)
        .await;
    let app = superuser_in_app(&db).await;
    let version: String = app
        .query_one("show server_version", &[])
        .await
        .expect("version")
        .get(0);
    assert!(version.starts_with("15."), "{version}");
    data_is_intact(&app, true).await;

    // Without the extension, the same upgrade goes through (the half-made
    // new cluster of the first attempt is made afresh).
    app.batch_execute("drop extension pg_trgm cascade")
        .await
        .expect("extension dropped");
    db.stop(Duration::from_secs(30)).await;
    upgrade.prepare(&user).await.expect("prepared again");
    upgrade.check(&user).await.expect("compatible now");
    upgrade.link(&user).await.expect("upgraded");
    let server = SocketServer::start(&upgrade.new_bin, &upgrade.new_data, &upgrade.work_dir).await;
    let app = server.connect("app").await;
    data_is_intact(&app, false).await;
}
