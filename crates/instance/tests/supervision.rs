//! Supervision of a real PostgreSQL 15: restart after a crash, shutdown
//! within the pod's grace period, fencing, parameters applied by reload or
//! by a controlled restart.

mod common;

use std::time::Duration;

use common::{TestCluster, desired, init_logs};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tusk_api::instance::{InstancePhase, InstanceRole};
use tusk_instance::desired::DesiredState;
use tusk_instance::settings::Password;

const STARTUP: Duration = Duration::from_secs(60);

fn signal(pid: i32, signal: Signal) {
    kill(Pid::from_raw(pid), signal).expect("signal postgres");
}

fn alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None::<Signal>).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_postgres_is_restarted_and_keeps_its_data() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    primary.start(desired("db-1", primary.address));
    primary.wait_status("ready", STARTUP, |r| r.ready).await;
    primary
        .app()
        .await
        .batch_execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2)")
        .await
        .expect("rows");
    let first = primary.postmaster_pid().expect("a postmaster");

    signal(first, Signal::SIGKILL);
    let report = primary
        .wait_status("restarted after the crash", Duration::from_secs(30), |r| {
            r.ready && r.crash_count == 1
        })
        .await;
    assert_eq!(report.role, InstanceRole::Primary);
    let second = primary.postmaster_pid().expect("a new postmaster");
    assert_ne!(first, second);
    let count: i64 = primary
        .app()
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(count, 2);
    let (_, metrics) = primary.http_get("/metrics").await;
    assert!(
        metrics.lines().any(|l| l == "tusk_postgres_crashes 1"),
        "{metrics}"
    );
    primary.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_clean_and_within_its_bound() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    primary.settings.stop_timeout = Duration::from_secs(5);
    primary.start(desired("db-1", primary.address));
    primary.wait_status("ready", STARTUP, |r| r.ready).await;
    // An open transaction must not hold the shutdown up.
    let client = primary.app().await;
    client
        .batch_execute("BEGIN; CREATE TABLE t (id int)")
        .await
        .expect("an open transaction");
    let pid = primary.postmaster_pid().expect("a postmaster");

    let took = primary.stop(Duration::from_secs(10)).await;
    println!("clean shutdown took {took:?}");
    assert!(took < Duration::from_secs(5), "fast shutdown took {took:?}");
    assert!(!alive(pid), "postgres has exited");
    let control = std::process::Command::new(format!("{}/pg_controldata", common::BIN_DIR))
        .arg(&primary.settings.pgdata)
        .env("LC_ALL", "C")
        .output()
        .expect("pg_controldata");
    let control = String::from_utf8_lossy(&control.stdout);
    assert!(
        control
            .lines()
            .any(|l| l.starts_with("Database cluster state:") && l.ends_with("shut down")),
        "{control}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_escalates_when_postgres_does_not_answer() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    primary.settings.stop_timeout = Duration::from_secs(1);
    primary.start(desired("db-1", primary.address));
    primary.wait_status("ready", STARTUP, |r| r.ready).await;
    let pid = primary.postmaster_pid().expect("a postmaster");
    // A stopped process handles neither fast nor immediate shutdown.
    signal(pid, Signal::SIGSTOP);

    // stop timeout (1 s) + immediate-shutdown wait (5 s), then SIGKILL;
    // `stop` fails the test if the manager is not gone within 15 s (a
    // loaded machine delays the timers, never skips them).
    let took = primary.stop(Duration::from_secs(15)).await;
    println!("escalated shutdown took {took:?}");
    assert!(
        took >= Duration::from_secs(6),
        "escalation skipped: {took:?}"
    );
    assert!(!alive(pid));
    // Its children (sessions of their own) are killed with it, not left
    // to notice the postmaster's death. SIGKILL is sent to each before
    // stop returns; a killed process may take a moment to leave /proc on
    // a loaded machine.
    common::eventually(
        "no process of PostgreSQL left after the kill",
        Duration::from_secs(2),
        || async {
            (!tusk_instance::fence::instance_running(&primary.settings.pgdata, None)).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_and_parameter_changes_are_applied() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    let mut wanted = desired("db-1", primary.address);
    primary.start(wanted.clone());
    primary.wait_status("ready", STARTUP, |r| r.ready).await;
    let pid = primary.postmaster_pid().expect("a postmaster");

    // A reloadable parameter: applied without a restart.
    wanted.parameters.insert("work_mem".into(), "7MB".into());
    primary.set_desired(wanted.clone());
    let superuser = primary.superuser().await;
    common::eventually("work_mem reloaded", Duration::from_secs(10), || async {
        let value: String = superuser.query_one("SHOW work_mem", &[]).await.ok()?.get(0);
        (value == "7MB").then_some(())
    })
    .await;
    assert_eq!(
        primary.postmaster_pid(),
        Some(pid),
        "no restart for a reload"
    );

    // In a cluster, settings that need a restart are left pending and
    // listed, the lowered standby minimums apart: the operator restarts
    // the instances one at a time.
    let mut in_a_cluster = DesiredState {
        restart_for_pending: false,
        ..wanted.clone()
    };
    in_a_cluster
        .parameters
        .insert("max_connections".into(), "25".into());
    in_a_cluster
        .parameters
        .insert("shared_buffers".into(), "24MB".into());
    primary.set_desired(in_a_cluster.clone());
    let report = primary
        .wait_status("pending settings listed", Duration::from_secs(20), |r| {
            r.pending_restart.len() == 2
        })
        .await;
    assert_eq!(
        report.pending_restart,
        ["max_connections", "shared_buffers"]
    );
    assert_eq!(report.pending_restart_lowered, ["max_connections"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(primary.postmaster_pid(), Some(pid), "not restarted");
    in_a_cluster
        .parameters
        .insert("max_connections".into(), "35".into());
    primary.set_desired(in_a_cluster);
    let report = primary
        .wait_status("raised instead", Duration::from_secs(20), |r| {
            r.pending_restart_lowered.is_empty()
        })
        .await;
    assert_eq!(
        report.pending_restart,
        ["max_connections", "shared_buffers"]
    );
    assert_eq!(primary.postmaster_pid(), Some(pid), "still not restarted");

    // On its own, a parameter that needs a restart is applied by a
    // controlled restart.
    wanted
        .parameters
        .insert("max_connections".into(), "41".into());
    primary.set_desired(wanted.clone());
    common::eventually(
        "max_connections applied",
        Duration::from_secs(30),
        || async {
            let client = primary.superuser_if_up().await?;
            let value: String = client
                .query_one("SHOW max_connections", &[])
                .await
                .ok()?
                .get(0);
            (value == "41").then_some(())
        },
    )
    .await;
    assert_ne!(primary.postmaster_pid(), Some(pid), "restarted");
    let report = primary
        .wait_status("ready", Duration::from_secs(30), |r| r.ready)
        .await;
    assert!(report.pending_restart.is_empty(), "{report:?}");
    assert_eq!(report.crash_count, 0, "a controlled restart is not a crash");

    // An operator-owned parameter is refused and reported; PostgreSQL keeps
    // running with the last good configuration.
    let mut refused = wanted.clone();
    refused
        .parameters
        .insert("wal_level".into(), "minimal".into());
    primary.set_desired(refused);
    let report = primary
        .wait_refusal("wal_level", Duration::from_secs(10))
        .await;
    assert!(report.ready, "still serving: {report:?}");
    primary.set_desired(wanted.clone());
    primary
        .wait_status("the error cleared", Duration::from_secs(40), |r| {
            r.last_error.is_none() && r.ready
        })
        .await;

    // Fenced: stopped and kept stopped, alive for liveness, not ready.
    wanted.fenced = true;
    primary.set_desired(wanted.clone());
    let report = primary
        .wait_status("fenced", Duration::from_secs(20), |r| {
            r.phase == InstancePhase::Fenced && r.role == InstanceRole::Stopped
        })
        .await;
    assert!(report.fenced);
    assert!(primary.postmaster_pid().is_none());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(primary.postmaster_pid().is_none(), "stays stopped");
    assert_eq!(primary.http_get("/healthz").await.0, 200);
    assert_eq!(primary.http_get("/readyz").await.0, 503);
    assert!(primary.superuser_if_up().await.is_none());

    wanted.fenced = false;
    primary.set_desired(wanted);
    let report = primary
        .wait_status("unfenced", Duration::from_secs(30), |r| r.ready)
        .await;
    assert_eq!(report.role, InstanceRole::Primary);
    primary.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_starts_before_a_primary_is_known() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut replica = cluster.instance("db-2");
    // A replica told of a primary but not of its address has nothing to
    // clone from: it waits, creating nothing.
    let mut wanted = desired("db-1", replica.address);
    wanted.primary_address = None;
    replica.start(wanted);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = replica.status().await;
    assert_eq!(report.phase, InstancePhase::WaitingForPrimary);
    assert_eq!(report.role, InstanceRole::Stopped);
    assert!(!report.ready);
    assert_eq!(replica.http_get("/healthz").await.0, 200);
    assert_eq!(replica.http_get("/readyz").await.0, 503);
    assert!(
        !replica.settings.pgdata.exists(),
        "no data directory created"
    );
    assert!(replica.postmaster_pid().is_none());
    replica.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_manager_keeps_its_data_and_applies_rotated_passwords() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    let wanted = desired("db-1", primary.address);
    primary.start(wanted.clone());
    primary.wait_status("ready", STARTUP, |r| r.ready).await;
    primary
        .app()
        .await
        .batch_execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
        .await
        .expect("rows");
    let identifier = primary.status().await.system_identifier;
    primary.stop(Duration::from_secs(30)).await;

    // The Secret was rotated while the pod was down.
    primary.settings.credentials.app_owner.password = Password::new("rotated-Secret-4");
    primary.start(wanted);
    let report = primary
        .wait_status("ready again", STARTUP, |r| r.ready)
        .await;
    assert_eq!(
        report.system_identifier, identifier,
        "the same cluster, not a new one"
    );
    common::eventually(
        "the rotated password works",
        Duration::from_secs(20),
        || async { primary.connect("app", "rotated-Secret-4", "app").await.ok() },
    )
    .await;
    assert!(
        primary
            .connect("app", common::APP_PASSWORD, "app")
            .await
            .is_err(),
        "the old password no longer works"
    );
    let client = primary
        .connect("app", "rotated-Secret-4", "app")
        .await
        .expect("connection");
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(count, 1);
    primary.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_minimum_removed_from_the_spec_is_reported_as_lowered() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    let mut raised = desired("db-1", primary.address);
    raised
        .parameters
        .insert("max_connections".into(), "120".into());
    primary.start(raised.clone());
    primary.wait_status("ready", STARTUP, |r| r.ready).await;

    // Back to PostgreSQL's default (100), below the running 120: a
    // standby restarted first with it could not replay this primary's
    // WAL, so it is a lowering like an explicit smaller value.
    let mut removed = DesiredState {
        restart_for_pending: false,
        ..raised
    };
    removed.parameters.remove("max_connections");
    primary.set_desired(removed);
    let report = primary
        .wait_status("the removal pending", Duration::from_secs(20), |r| {
            !r.pending_restart.is_empty()
        })
        .await;
    assert_eq!(report.pending_restart, ["max_connections"]);
    assert_eq!(report.pending_restart_lowered, ["max_connections"]);
    primary.stop(Duration::from_secs(30)).await;
}
