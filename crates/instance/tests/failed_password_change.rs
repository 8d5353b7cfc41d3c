//! A password change that PostgreSQL refuses leaves no verifier in any
//! log: the `ALTER ROLE ... PASSWORD` the manager runs inside a function
//! fails (here, for a role that does not exist), and PostgreSQL would log
//! the failing statement, verifier included, as the error's CONTEXT. Every
//! log line (the manager's and PostgreSQL's, with every statement logged)
//! and the error the caller gets are searched for the verifier and the
//! password.

mod common;

use std::time::Duration;

use common::{CapturedLogs, TestCluster, desired};

const PASSWORD: &str = "Refused-Password-4";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_change_logs_no_verifier() {
    let captured = CapturedLogs::install();

    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    let mut wanted = desired("db-1", db.address);
    wanted
        .parameters
        .insert("log_statement".into(), "all".into());
    db.start(wanted);
    db.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    let client = db.superuser().await;
    let refused = tusk_instance::passwords::set_password(&client, "no_such_role", PASSWORD)
        .await
        .expect_err("no such role");
    let refused = format!("{refused} {refused:?}");
    assert!(refused.contains("no_such_role"), "{refused}");
    // The session is usable afterwards.
    let one: i32 = client
        .query_one("SELECT 1", &[])
        .await
        .expect("query")
        .get(0);
    assert_eq!(one, 1);
    db.stop(Duration::from_secs(30)).await;

    let logs = captured.text();
    assert!(
        logs.contains("no_such_role"),
        "PostgreSQL logged the failure"
    );
    for (secret, text) in [
        ("SCRAM-SHA-256$", &logs),
        (PASSWORD, &logs),
        ("SCRAM-SHA-256$", &refused),
    ] {
        if let Some(line) = text.lines().find(|line| line.contains(secret)) {
            panic!("`{secret}` appears: {line}");
        }
    }
}
