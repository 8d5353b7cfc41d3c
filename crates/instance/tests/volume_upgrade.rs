//! The upgrade pod's work (`tusk instance upgrade`, R27) on a real volume:
//! a PostgreSQL 15 primary's data, made and stopped by the instance
//! manager, upgraded in place to 16 ([`VolumeUpgrade`]), then served by
//! the manager with 16's programs, which gathers the planner statistics
//! the upgrade asks for and removes the marker. A pod run again, after
//! success or after being cut short while linking or swapping, ends with
//! the data upgraded; a refused check leaves 15 serving the data as
//! before.
//!
//! PostgreSQL 16 comes from `scripts/setup` (`/opt/tusk/postgresql`).

mod common;

use std::time::Duration;

use common::{
    BIN_DIR, SUPERUSER_PASSWORD, TestInstance, desired, eventually, init_logs, installed_bin_dir,
    postgres_user, stopped_primary_with,
};
use tokio_postgres::Client;
use tusk_api::upgrade::{Outcome, Step};
use tusk_instance::datadir::data_major_version;
use tusk_instance::major_upgrade::volume::{VolumeUpgrade, analyze_marker};

const STARTUP: Duration = Duration::from_secs(60);
/// The longest one run of the upgrade (or one of its steps) may take here.
const UPGRADE_BOUND: Duration = Duration::from_secs(300);

const ORDERS: &str =
    "create table orders (id int primary key, customer int not null, note text not null);
    insert into orders select i, i % 100, 'order ' || i from generate_series(1, 20000) i;
    create index orders_customer on orders (customer);";

fn upgrade_to_16(db: &TestInstance) -> VolumeUpgrade {
    VolumeUpgrade {
        pgdata: db.settings.pgdata.clone(),
        old_bin: BIN_DIR.into(),
        new_bin: installed_bin_dir(16),
        new_major: 16,
        superuser: "postgres".into(),
        work_dir: db.root.path().join("upgrade"),
    }
}

/// One run of the upgrade pod's work.
async fn run(volume: &VolumeUpgrade) -> Outcome {
    let outcome = tokio::time::timeout(UPGRADE_BOUND, volume.run(&postgres_user()))
        .await
        .expect("the upgrade ends within its bound");
    println!("outcome: {}", outcome.to_message());
    outcome
}

fn data_major(volume: &VolumeUpgrade) -> u32 {
    data_major_version(&volume.pgdata).expect("a readable PG_VERSION")
}

/// The data is 16's, marked for statistics, and nothing of the upgrade
/// is left beside it.
fn upgraded_in_place(volume: &VolumeUpgrade, outcome: &Outcome) {
    assert_eq!(outcome.failed_step, None, "{outcome:?}");
    assert_eq!(outcome.data_version, Some(16));
    assert_eq!(data_major(volume), 16);
    assert!(analyze_marker(&volume.pgdata).is_file());
    assert!(!volume.aside(15).exists(), "the old cluster is removed");
    assert!(!volume.new_data().exists(), "the new cluster is in place");
}

/// The instance manager serves the volume as primary with `major`'s
/// programs: the superuser in the `app` database.
async fn serve_with(db: &mut TestInstance, major: u32) -> Client {
    db.settings.bin_dir = installed_bin_dir(major);
    db.start(desired("db-1", db.address));
    db.wait_status("a ready primary", STARTUP, |r| r.ready)
        .await;
    let app = db
        .connect("postgres", SUPERUSER_PASSWORD, "app")
        .await
        .expect("superuser in app");
    let version: String = app
        .query_one("show server_version", &[])
        .await
        .expect("version")
        .get(0);
    assert!(version.starts_with(&format!("{major}.")), "{version}");
    app
}

async fn count(client: &Client, query: &str) -> i64 {
    client
        .query_one(query, &[])
        .await
        .expect("a count")
        .get::<_, i64>(0)
}

/// Every row is there, and the index serves its query.
async fn orders_are_intact(app: &Client) {
    assert_eq!(count(app, "select count(*) from orders").await, 20_000);
    app.batch_execute("set enable_seqscan = off")
        .await
        .expect("set");
    let plan: Vec<String> = app
        .query("explain select id from orders where customer = 7", &[])
        .await
        .expect("explain")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter().any(|line| line.contains("orders_customer")),
        "the index serves the query: {plan:#?}"
    );
    assert_eq!(
        count(app, "select count(*) from orders where customer = 7").await,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_15_volume_is_upgraded_in_place_and_its_primary_gathers_statistics() {
    init_logs();
    let mut db = stopped_primary_with(ORDERS).await;
    let volume = upgrade_to_16(&db);
    let outcome = run(&volume).await;
    upgraded_in_place(&volume, &outcome);
    assert_eq!(outcome.from_version, Some(15));

    // The pod run again (its outcome lost, say) succeeds and changes nothing.
    let control = volume.pgdata.join("global/pg_control");
    let modified = || {
        std::fs::metadata(&control)
            .and_then(|m| m.modified())
            .expect("pg_control")
    };
    let before = modified();
    let again = run(&volume).await;
    upgraded_in_place(&volume, &again);
    assert_eq!(
        again.from_version,
        Some(16),
        "the data was 16's when it ran"
    );
    assert!(again.message.contains("already"), "{}", again.message);
    assert_eq!(modified(), before, "the new cluster is untouched");

    // The primary serves every row, and gathers the statistics pg_upgrade
    // did not carry over, once.
    let app = serve_with(&mut db, 16).await;
    orders_are_intact(&app).await;
    let marker = analyze_marker(&volume.pgdata);
    eventually("the statistics gathered", STARTUP, || async {
        (!marker.exists()).then_some(())
    })
    .await;
    let analyzed = count(
        &app,
        "select count(*) from pg_stats where tablename = 'orders' and attname = 'customer'",
    )
    .await;
    assert_eq!(analyzed, 1, "the planner has statistics again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_cut_short_is_undone_and_the_upgrade_done_again() {
    init_logs();
    let mut db = stopped_primary_with(ORDERS).await;
    let volume = upgrade_to_16(&db);
    // What pg_upgrade --link leaves when it is stopped while linking: a
    // half-made new cluster, and the old one's pg_control renamed.
    let (engine, user) = (volume.engine(), postgres_user());
    tokio::time::timeout(UPGRADE_BOUND, engine.prepare(&user))
        .await
        .expect("prepared in time")
        .expect("prepared");
    let global = volume.pgdata.join("global");
    std::fs::rename(global.join("pg_control"), global.join("pg_control.old"))
        .expect("pg_control renamed");

    let outcome = run(&volume).await;
    upgraded_in_place(&volume, &outcome);
    assert_eq!(outcome.from_version, Some(15));
    let app = serve_with(&mut db, 16).await;
    orders_are_intact(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_cut_short_is_finished_by_the_next_run() {
    init_logs();
    let mut db = stopped_primary_with(ORDERS).await;
    let volume = upgrade_to_16(&db);
    let (engine, user) = (volume.engine(), postgres_user());
    let linked = async {
        engine.prepare(&user).await?;
        engine.check(&user).await?;
        engine.link(&user).await
    };
    tokio::time::timeout(UPGRADE_BOUND, linked)
        .await
        .expect("linked in time")
        .expect("linked");
    // Stopped between the two renames of the swap.
    std::fs::rename(&volume.pgdata, volume.aside(15)).expect("moved aside");

    let outcome = run(&volume).await;
    upgraded_in_place(&volume, &outcome);
    assert_eq!(outcome.from_version, Some(15));
    let app = serve_with(&mut db, 16).await;
    orders_are_intact(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_of_a_refused_reg_type_fails_the_check_and_15_serves_the_data_again() {
    init_logs();
    // pg_upgrade cannot carry regproc values (function OIDs) over.
    let data = format!(
        "{ORDERS} create table handlers (id int, handler regproc);
        insert into handlers values (1, 'now');"
    );
    let mut db = stopped_primary_with(&data).await;
    let volume = upgrade_to_16(&db);
    let outcome = run(&volume).await;
    let read = Outcome::from_message(&outcome.to_message()).expect("an outcome");
    assert_eq!(read.failed_step, Some(Step::Check), "{outcome:?}");
    assert!(
        read.message.contains("reg*") && read.message.contains("public.handlers.handler"),
        "the check and the column are named: {}",
        read.message
    );
    assert_eq!((read.from_version, read.data_version), (Some(15), Some(15)));
    assert_eq!(data_major(&volume), 15);
    assert!(volume.pgdata.join("global/pg_control").is_file());
    assert!(!analyze_marker(&volume.pgdata).exists());

    let app = serve_with(&mut db, 15).await;
    orders_are_intact(&app).await;
    assert_eq!(count(&app, "select count(*) from handlers").await, 1);
}
