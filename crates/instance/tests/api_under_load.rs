//! The HTTP API under load, against a real PostgreSQL 15: many requests
//! at once (probes, polls, scrapes, or a flood from the pod network) share
//! one observation of PostgreSQL instead of each opening a superuser
//! connection, so readiness holds when there are more requests than
//! `max_connections` (30 in these tests).

mod common;

use std::time::Duration;

use common::{TestCluster, desired, init_logs};
use futures::future::join_all;

const STARTUP: Duration = Duration::from_secs(60);
/// Ten times the test servers' `max_connections`.
const AT_ONCE: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_requests_leaves_the_primary_ready_and_its_connections_free() {
    init_logs();
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    db.start(desired("db-1", db.address));
    db.wait_status("a ready primary", STARTUP, |r| r.ready)
        .await;

    for path in ["/readyz", "/status", "/metrics"] {
        let answers = join_all((0..AT_ONCE).map(|_| db.http_get(path))).await;
        let failed: Vec<&(u16, String)> = answers.iter().filter(|(code, _)| *code != 200).collect();
        assert!(
            failed.is_empty(),
            "{} of {AT_ONCE} {path} requests failed, first: {:?}",
            failed.len(),
            failed.first()
        );
    }
    // What the requests shared was real: the report says what PostgreSQL
    // said, and the metrics carry the database sizes.
    let report = db.status().await;
    assert!(report.ready && report.current_lsn.is_some(), "{report:?}");
    let (_, metrics) = db.http_get("/metrics").await;
    assert!(metrics.contains("database_size_bytes"), "{metrics}");
    // The application's own connections were never crowded out.
    let app = db.app().await;
    let one: i32 = app.query_one("select 1", &[]).await.expect("query").get(0);
    assert_eq!(one, 1);
    db.stop(Duration::from_secs(30)).await;
}
