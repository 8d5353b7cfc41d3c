//! No credential ever reaches the logs (R17): every log line of a primary
//! bootstrap, a replica clone, a switchover with rewind and the HTTP
//! endpoints is captured and searched for the passwords. PostgreSQL runs
//! with every statement logged, with its parameters, as a user may set it
//! (`log_statement: all`, `log_min_duration_statement: 0`), and its log
//! lines are part of the capture. Declared roles (`spec.roles`) are kept
//! on both primaries, one with a password and one whose membership fails.

mod common;

use std::time::Duration;

use common::{CapturedLogs, TestCluster, desired};
use tusk_api::instance::InstanceRole;
use tusk_api::v1alpha1::{RoleSpec, RoleState};
use tusk_instance::declared_roles::{DeclaredRole, RolePassword};
use tusk_instance::settings::Password;

/// A declared role's password, with quotes and a dollar.
const ROLE_PASSWORD: &str = "Role-'Pass'-\"7\"$x";

fn declared_roles() -> Vec<DeclaredRole> {
    vec![
        DeclaredRole {
            spec: RoleSpec {
                login: true,
                ..RoleSpec::named("web")
            },
            password: RolePassword::Known(Password::new(ROLE_PASSWORD)),
        },
        DeclaredRole {
            spec: RoleSpec {
                in_roles: vec!["missing".into()],
                ..RoleSpec::named("broken")
            },
            password: RolePassword::None,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_never_contain_credentials() {
    let captured = CapturedLogs::install();

    let mut cluster = TestCluster::new();
    let mut a = cluster.instance("db-1");
    let mut b = cluster.instance("db-2");
    let logging_everything = |primary: &str, address| {
        let mut desired = desired(primary, address);
        for (name, value) in [
            ("log_statement", "all"),
            ("log_min_duration_statement", "0"),
        ] {
            desired.parameters.insert(name.into(), value.into());
        }
        desired.roles = declared_roles();
        desired
    };
    let on_a = logging_everything("db-1", a.address);
    a.start(on_a.clone());
    a.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    b.start(on_a);
    b.wait_status("a streaming replica", Duration::from_secs(60), |r| r.ready)
        .await;
    // Declared roles: one with a password, one whose membership fails.
    let roles_converged = |r: &tusk_api::instance::InstanceReport| {
        let states: Vec<(String, RoleState)> = r
            .roles
            .iter()
            .flatten()
            .map(|s| (s.name.clone(), s.state))
            .collect();
        states
            == [
                ("web".to_owned(), RoleState::Reconciled),
                ("broken".to_owned(), RoleState::Failed),
            ]
    };
    a.wait_status(
        "declared roles converged",
        Duration::from_secs(30),
        roles_converged,
    )
    .await;
    a.connect("web", ROLE_PASSWORD, "app")
        .await
        .expect("the declared role logs in with its password");
    // A failed login is logged by PostgreSQL; the attempted password is not.
    assert!(a.connect("app", "wrong-Password-9", "app").await.is_err());
    for path in ["/status", "/metrics", "/readyz", "/healthz"] {
        a.http_get(path).await;
    }
    let on_b = logging_everything("db-2", b.address);
    b.set_desired(on_b.clone());
    b.wait_status("db-2 promoted", Duration::from_secs(30), |r| {
        r.role == InstanceRole::Primary
    })
    .await;
    b.wait_status(
        "declared roles converged on the new primary",
        Duration::from_secs(30),
        roles_converged,
    )
    .await;
    a.set_desired(on_b);
    a.wait_status("db-1 rejoined", Duration::from_secs(60), |r| {
        r.ready && r.role == InstanceRole::Replica
    })
    .await;
    a.stop(Duration::from_secs(30)).await;
    b.stop(Duration::from_secs(30)).await;

    let logs = captured.text();
    let lines = logs.lines().count();
    assert!(lines > 50, "the logs were captured ({lines} lines)");
    assert!(logs.contains("pg_rewind"), "the switchover was logged");
    assert!(
        logs.contains("tusk_set_password"),
        "PostgreSQL logged statements, among them the password function's creation"
    );
    assert!(
        logs.contains("CREATE ROLE \\\"web\\\""),
        "PostgreSQL logged the declared role's statements"
    );
    for secret in [
        common::SUPERUSER_PASSWORD,
        common::APP_PASSWORD,
        common::REPLICATION_PASSWORD,
        "wrong-Password-9",
        ROLE_PASSWORD,
        "SCRAM-SHA-256$",
    ] {
        if let Some(line) = logs.lines().find(|line| line.contains(secret)) {
            panic!("`{secret}` appears in the logs: {line}");
        }
    }
}
