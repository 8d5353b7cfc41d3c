//! Bootstrap, streaming replication, switchover and rejoin with real
//! PostgreSQL 15 (R24, the mechanics of R25).

mod common;

use std::time::{Duration, Instant};

use common::{TestCluster, desired, init_logs};
use tusk_api::instance::{InstancePhase, InstanceRole};
use tusk_instance::desired::DesiredState;
use tusk_instance::postgres::synchronous::{Synchronous, SynchronousMode, SynchronousStandbys};

const STARTUP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_primary_is_initialised_with_checksums_roles_and_password_only_access() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut primary = cluster.instance("db-1");
    // A half-finished earlier attempt must not block the bootstrap.
    let staging = primary.settings.staging_dir();
    std::fs::create_dir_all(staging.join("base")).expect("leftover staging directory");
    std::fs::write(staging.join("PG_VERSION"), "15\n").expect("leftover file");

    let started = Instant::now();
    primary.start(desired("db-1", primary.address));
    let report = primary
        .wait_status("a ready primary", STARTUP, |r| r.ready)
        .await;
    println!("primary bootstrap to ready: {:?}", started.elapsed());
    assert_eq!(report.role, InstanceRole::Primary);
    assert_eq!(report.phase, InstancePhase::Running);
    assert_eq!(report.timeline, Some(1));
    assert!(
        report
            .postgres_version
            .as_deref()
            .is_some_and(|v| v.starts_with("15"))
    );
    assert!(
        !staging.exists(),
        "the staging directory was moved into place"
    );

    let superuser = primary.superuser().await;
    let checksums: String = superuser
        .query_one("SHOW data_checksums", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(checksums, "on");
    let owner: String = superuser
        .query_one(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'app'",
            &[],
        )
        .await
        .expect("the application database exists")
        .get(0);
    assert_eq!(owner, "app");
    let replication: bool = superuser
        .query_one(
            "SELECT rolreplication FROM pg_roles WHERE rolname = 'streaming_replica'",
            &[],
        )
        .await
        .expect("the replication role exists")
        .get(0);
    assert!(replication);
    let listen: String = superuser
        .query_one("SHOW listen_addresses", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(listen, primary.address.to_string());

    // Passwords are required and checked over the network.
    let app = primary.app().await;
    app.batch_execute("CREATE TABLE t (id int primary key)")
        .await
        .expect("the owner can create tables in its database");
    assert!(primary.connect("app", "wrong", "app").await.is_err());

    // The report never carries credentials.
    let (_, body) = primary.http_get("/status").await;
    for secret in [
        common::SUPERUSER_PASSWORD,
        common::APP_PASSWORD,
        common::REPLICATION_PASSWORD,
    ] {
        assert!(!body.contains(secret));
    }
    let (code, _) = primary.http_get("/healthz").await;
    assert_eq!(code, 200);
    let (code, _) = primary.http_get("/readyz").await;
    assert_eq!(code, 200);
    let (code, metrics) = primary.http_get("/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metrics
            .lines()
            .any(|l| l == "tusk_postgres_role{role=\"primary\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("tusk_postgres_database_size_bytes ")),
        "{metrics}"
    );
    primary.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_clone_stream_and_follow_a_switchover_that_rewinds_the_former_primary() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    let mut c = cluster.instance("db-3");
    // Quorum commit: every acknowledged write is on at least one standby.
    let synchronous = Some(SynchronousStandbys {
        rule: Synchronous {
            mode: SynchronousMode::Any,
            number: 1,
        },
        candidates: vec![],
    });
    let on_a = DesiredState {
        synchronous: synchronous.clone(),
        ..desired("db-1", a.address)
    };
    a.start(on_a.clone());
    a.wait_status("a ready primary", STARTUP, |r| r.ready).await;

    // Clone and stream.
    let started = Instant::now();
    b.start(on_a.clone());
    let report_b = b
        .wait_status("a streaming replica", STARTUP, |r| r.ready)
        .await;
    println!("replica clone to streaming: {:?}", started.elapsed());
    assert_eq!(report_b.role, InstanceRole::Replica);
    assert_eq!(report_b.streaming, Some(true));
    assert_eq!(report_b.upstream, Some(a.address.to_string()));
    c.start(on_a.clone());
    c.wait_status("a second streaming replica", STARTUP, |r| r.ready)
        .await;

    // With quorum commit and two standbys, every write below is acknowledged
    // only once a standby has flushed it.
    let app_a = a.app().await;
    app_a
        .batch_execute(
            "CREATE TABLE t (id int primary key); INSERT INTO t SELECT generate_series(1, 200)",
        )
        .await
        .expect("rows on the primary");
    let app_b = b.app().await;
    common::eventually(
        "rows streamed to the replica",
        Duration::from_secs(20),
        || async {
            let count: i64 = app_b
                .query_one("SELECT count(*) FROM t", &[])
                .await
                .ok()?
                .get(0);
            (count == 200).then_some(())
        },
    )
    .await;

    // /status agrees with pg_stat_replication once the standbys caught up.
    // The server writes WAL of its own (checkpoints, running-transaction
    // snapshots) at any moment, so the three readings are compared only as
    // a set taken while nothing moved; a mismatch that persists fails below.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (report_a, rows, report_b) = loop {
        let report_a = a.status().await;
        let rows = a
            .superuser()
            .await
            .query(
                "SELECT application_name, state, sync_state, replay_lsn::text \
                 FROM pg_stat_replication ORDER BY application_name",
                &[],
            )
            .await
            .expect("pg_stat_replication");
        let report_b = b.status().await;
        let caught_up = report_a.standbys.len() == 2
            && report_a
                .standbys
                .iter()
                .all(|s| s.replay_lsn == report_a.current_lsn);
        let same_moment = rows
            .iter()
            .all(|row| Some(row.get::<_, String>(3)) == report_a.current_lsn)
            && report_b.replayed_lsn == report_a.current_lsn;
        if (caught_up && same_moment) || std::time::Instant::now() > deadline {
            break (report_a, rows, report_b);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(rows.len(), report_a.standbys.len(), "{report_a:#?}");
    for (row, standby) in rows.iter().zip(&report_a.standbys) {
        assert_eq!(standby.name, row.get::<_, String>(0));
        assert_eq!(standby.state, row.get::<_, String>(1));
        assert_eq!(standby.sync_state, row.get::<_, String>(2));
        assert_eq!(standby.replay_lsn, Some(row.get::<_, String>(3)));
        assert_eq!(standby.replay_lag_bytes, Some(0));
        assert_eq!(standby.sync_state, "quorum");
    }
    assert_eq!(report_a.standbys[0].name, "db-2");
    assert_eq!(report_b.replayed_lsn, report_a.current_lsn);
    assert_eq!(report_b.lag_bytes, Some(0));
    assert_eq!(report_b.system_identifier, report_a.system_identifier);

    // db-2 becomes the target primary while db-1 still runs as primary (a
    // partition, say): db-2 waits for its WAL receiver to stop, then
    // promotes anyway. db-1 is told late, and meanwhile accepts a write
    // that the new primary never sees (local commit only, so it does not
    // wait for a standby).
    let on_b = DesiredState {
        synchronous: synchronous.clone(),
        ..desired("db-2", b.address)
    };
    let started = Instant::now();
    b.set_desired(on_b.clone());
    let promoted = b
        .wait_status("db-2 promoted", Duration::from_secs(60), |r| {
            r.role == InstanceRole::Primary && r.ready
        })
        .await;
    println!(
        "promotion, target change to writable primary: {:?}",
        started.elapsed()
    );
    assert_eq!(promoted.timeline, Some(2));
    app_a
        .batch_execute("SET synchronous_commit = local; INSERT INTO t VALUES (999999)")
        .await
        .expect("the old primary still accepts a write until told");

    let started = Instant::now();
    a.set_desired(on_b.clone());
    let rejoined = a
        .wait_status("db-1 streaming from db-2", Duration::from_secs(60), |r| {
            r.ready && r.timeline == Some(2)
        })
        .await;
    println!(
        "former primary stop, rewind and streaming again: {:?}",
        started.elapsed()
    );
    assert_eq!(rejoined.role, InstanceRole::Replica);
    assert_eq!(rejoined.upstream, Some(b.address.to_string()));

    // The other standby follows the new primary's address. Its WAL receiver
    // first streams the rest of timeline 1 from db-2 (status then reports
    // db-2 as upstream on timeline 1, truthfully), then switches to
    // timeline 2 at the promotion point.
    c.set_desired(on_b.clone());
    let followed = c
        .wait_status(
            "db-3 streaming timeline 2 from db-2",
            Duration::from_secs(30),
            |r| r.ready && r.upstream == Some(b.address.to_string()) && r.timeline == Some(2),
        )
        .await;
    assert_eq!(followed.role, InstanceRole::Replica);
    assert_eq!(followed.streaming, Some(true));

    // Every acknowledged row before the switch is everywhere; the diverged
    // write is gone; new writes flow from db-2 to both standbys.
    let app_b = b.app().await;
    app_b
        .batch_execute("INSERT INTO t VALUES (201)")
        .await
        .expect("the new primary is writable");
    let expected: Vec<i32> = (1..=201).collect();
    for (name, instance) in [("db-1", &a), ("db-3", &c)] {
        let client = instance.app().await;
        common::eventually(
            &format!("every row and the new write on {name}"),
            Duration::from_secs(20),
            || async {
                let ids: Vec<i32> = client
                    .query("SELECT id FROM t ORDER BY id", &[])
                    .await
                    .ok()?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                (ids == expected).then_some(())
            },
        )
        .await;
    }
    let ids_b: Vec<i32> = app_b
        .query("SELECT id FROM t ORDER BY id", &[])
        .await
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids_b, expected);
    let report_b = b
        .wait_status("db-2 sees both standbys", Duration::from_secs(20), |r| {
            let streaming = |name: &str| {
                r.standbys
                    .iter()
                    .any(|s| s.name == name && s.state == "streaming")
            };
            streaming("db-1") && streaming("db-3")
        })
        .await;
    assert_eq!(report_b.role, InstanceRole::Primary);

    for instance in [&mut a, &mut b, &mut c] {
        instance.stop(Duration::from_secs(30)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_former_primary_whose_rewind_fails_is_cloned_afresh() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    let on_a = desired("db-1", a.address);
    a.start(on_a.clone());
    a.wait_status("a ready primary", STARTUP, |r| r.ready).await;
    a.app()
        .await
        .batch_execute("CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 50)")
        .await
        .expect("rows");
    b.start(on_a);
    b.wait_status("a streaming replica", STARTUP, |r| r.ready)
        .await;
    let report_a = a
        .wait_status("the standby caught up", Duration::from_secs(20), |r| {
            r.standbys.len() == 1 && r.standbys[0].replay_lsn == r.current_lsn
        })
        .await;
    assert_eq!(report_a.standbys[0].name, "db-2");

    // The former primary's manager is down during the switchover, and its
    // WAL is lost: pg_rewind cannot find where the histories diverged.
    a.stop(Duration::from_secs(30)).await;
    let on_b = desired("db-2", b.address);
    b.set_desired(on_b.clone());
    b.wait_status("db-2 promoted", Duration::from_secs(30), |r| {
        r.role == InstanceRole::Primary && r.ready
    })
    .await;
    let pg_wal = a.settings.pgdata.join("pg_wal");
    for entry in std::fs::read_dir(&pg_wal).expect("pg_wal") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::remove_file(&path).expect("remove a WAL segment");
        }
    }

    let started = Instant::now();
    a.start(on_b);
    let report = a
        .wait_status("db-1 cloned from db-2", Duration::from_secs(60), |r| {
            r.ready && r.timeline == Some(2)
        })
        .await;
    println!(
        "failed rewind, then clone to streaming: {:?}",
        started.elapsed()
    );
    assert_eq!(report.role, InstanceRole::Replica);
    let aside = a.settings.pgdata.with_file_name("pgdata.replaced");
    assert!(
        aside.join("PG_VERSION").is_file(),
        "the old data directory is kept aside"
    );
    assert_eq!(
        report.kept_copy,
        Some(aside.display().to_string()),
        "the kept copy is reported"
    );
    let count: i64 = a
        .app()
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(count, 50);
    a.stop(Duration::from_secs(30)).await;
    b.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_left_behind_by_removed_wal_is_cloned_afresh() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    let mut on_a = desired("db-1", a.address);
    // Keep no extra WAL, so a standby that is away misses what it needs.
    on_a.parameters.insert("wal_keep_size".into(), "0".into());
    a.start(on_a.clone());
    a.wait_status("a ready primary", STARTUP, |r| r.ready).await;
    b.start(on_a.clone());
    b.wait_status("a streaming replica", STARTUP, |r| r.ready)
        .await;
    b.stop(Duration::from_secs(30)).await;

    let app = a.app().await;
    app.batch_execute("CREATE TABLE t (id int)")
        .await
        .expect("table");
    let superuser = a.superuser().await;
    for round in 0..4 {
        app.batch_execute(&format!("INSERT INTO t VALUES ({round})"))
            .await
            .expect("a row");
        superuser
            .batch_execute("SELECT pg_switch_wal(); CHECKPOINT")
            .await
            .expect("a new WAL segment and a checkpoint");
    }

    let started = Instant::now();
    b.start(on_a);
    let replaced = b.settings.pgdata.with_file_name("pgdata.replaced");
    common::eventually(
        "db-2 recloned and holding every row",
        Duration::from_secs(90),
        || async {
            if !replaced.is_dir() {
                return None;
            }
            let client = b.connect("app", common::APP_PASSWORD, "app").await.ok()?;
            let count: i64 = client
                .query_one("SELECT count(*) FROM t", &[])
                .await
                .ok()?
                .get(0);
            (count == 4).then_some(())
        },
    )
    .await;
    println!(
        "stalled standby recloned and caught up: {:?}",
        started.elapsed()
    );
    let report = b
        .wait_status("db-2 streaming", Duration::from_secs(30), |r| r.ready)
        .await;
    assert_eq!(report.role, InstanceRole::Replica);
    a.stop(Duration::from_secs(30)).await;
    b.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_pointed_at_another_clusters_primary_keeps_its_data() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    // A primary of an unrelated cluster (its own initdb).
    let mut stranger = cluster.instance("db-3");
    let on_a = desired("db-1", a.address);
    a.start(on_a.clone());
    stranger.start(desired("db-3", stranger.address));
    a.wait_status("a ready primary", STARTUP, |r| r.ready).await;
    a.app()
        .await
        .batch_execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2), (3)")
        .await
        .expect("rows");
    b.start(on_a.clone());
    let report = b
        .wait_status("a streaming replica", STARTUP, |r| r.ready)
        .await;
    let identifier = report.system_identifier;
    stranger
        .wait_status("the stranger ready", STARTUP, |r| r.ready)
        .await;

    // A wrong target: the replica must neither rewind onto nor clone the
    // other cluster.
    b.set_desired(desired("db-3", stranger.address));
    let report = b
        .wait_refusal("refusing to replace", Duration::from_secs(60))
        .await;
    println!("refusal: {:?}", report.last_error);
    assert!(
        !b.settings.pgdata.with_file_name("pgdata.replaced").exists(),
        "the data was not moved aside"
    );

    // Pointed back at its own primary, it streams again with its data.
    b.set_desired(on_a);
    let report = b
        .wait_status("streaming from db-1 again", Duration::from_secs(60), |r| {
            r.ready && r.upstream == Some(a.address.to_string())
        })
        .await;
    assert_eq!(report.system_identifier, identifier);
    let count: i64 = b
        .app()
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(count, 3);
    for instance in [&mut a, &mut b, &mut stranger] {
        instance.stop(Duration::from_secs(30)).await;
    }
}

/// `SHOW name` on `instance`, if it is up.
async fn shown(instance: &common::TestInstance, name: &str) -> Option<String> {
    let client = instance.superuser_if_up().await?;
    let row = client.query_one(&format!("SHOW {name}"), &[]).await.ok()?;
    row.try_get(0).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_restarted_with_a_lowered_minimum_starts_at_its_primarys_value() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    let mut on_a = desired("db-1", a.address);
    on_a.parameters
        .insert("max_connections".into(), "120".into());
    a.start(on_a.clone());
    a.wait_status("a ready primary", STARTUP, |r| r.ready).await;
    b.start(on_a.clone());
    b.wait_status("a streaming replica", STARTUP, |r| r.ready)
        .await;
    b.stop(Duration::from_secs(30)).await;

    // The standby restarts with the lowered value first, as a rollout
    // does that sees it pending: PostgreSQL refuses to run a hot standby
    // below its primary's 120.
    let mut lowered = on_a.clone();
    lowered
        .parameters
        .insert("max_connections".into(), "90".into());
    // As in a cluster: a pending setting waits for the operator.
    let mut on_b = lowered.clone();
    on_b.restart_for_pending = false;
    b.start(on_b);
    let report = b
        .wait_status("the standby streaming again", STARTUP, |r| r.ready)
        .await;
    assert_eq!(report.role, InstanceRole::Replica);
    assert_eq!(shown(&b, "max_connections").await.as_deref(), Some("120"));
    assert!(report.pending_restart.is_empty(), "{report:#?}");
    // It says so, so the operator keeps looking until it can restart it.
    assert_eq!(report.held_minimums, ["max_connections"], "{report:#?}");
    assert!(
        a.status().await.held_minimums.is_empty(),
        "a primary holds none"
    );

    // The primary restarts with 90 and writes that to its WAL; the
    // standby's floor drops with it, and 90 waits for its restart.
    a.set_desired(lowered);
    a.wait_status("the primary at 90", STARTUP, |r| r.ready)
        .await;
    common::eventually("the primary at 90", STARTUP, || async {
        (shown(&a, "max_connections").await.as_deref() == Some("90")).then_some(())
    })
    .await;
    let report = b
        .wait_status("90 pending on the standby", STARTUP, |r| {
            r.pending_restart.iter().any(|p| p == "max_connections")
        })
        .await;
    assert!(report.ready, "{report:#?}");
    assert!(report.held_minimums.is_empty(), "{report:#?}");
    a.stop(Duration::from_secs(30)).await;
    b.stop(Duration::from_secs(30)).await;
}
