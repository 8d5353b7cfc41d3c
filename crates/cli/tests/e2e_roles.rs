//! Declared roles end to end (`spec.roles`, docs/roles.md): roles applied
//! from YAML alone, an application connecting with the password Tusk
//! generated, a password changed in its Secret and an attribute in the
//! spec, a converged cluster writing nothing, a role dropped with
//! `ensure: absent`, a role made by hand left exactly as it was, and a
//! role whose Secret is missing reported with the reason.

mod common;

use std::time::Duration;

use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tusk_api::v1alpha1::{RoleState, RoleStatus};

const CLUSTER: &str = "roles";
/// A password with quotes, a backslash and a dollar: quoting is tested.
const BATCH_PASSWORD: &str = "it's a \"quoted\" $1 \\ pass";

fn roles(batch_ensure: &str, web_limit: i32) -> serde_json::Value {
    json!([
        {"name": "readers"},
        {"name": "web", "login": true, "connectionLimit": web_limit, "inRoles": ["readers"]},
        {"name": "batch", "login": true, "ensure": batch_ensure,
         "passwordSecret": {"name": "batch-pw"}},
    ])
}

async fn put_secret(world: &World, name: &str, password: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "stringData": {"password": password},
    }))
    .expect("a secret");
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    secrets
        .patch(
            name,
            &PatchParams::apply("e2e-roles").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("secret applied");
}

async fn set_roles(world: &World, roles: serde_json::Value) {
    world
        .clusters()
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"roles": roles}})),
        )
        .await
        .expect("roles patched");
}

/// Connects as `user` with `password` through the -rw Service.
async fn connect_as(
    world: &World,
    user: &str,
    password: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    connect_to(world, CLUSTER, user, password).await
}

/// Connects as `user` with `password` through `cluster`'s -rw Service.
async fn connect_to(
    world: &World,
    cluster: &str,
    user: &str,
    password: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let host = world.service_ip(&format!("{cluster}-rw")).await;
    let mut config = tokio_postgres::Config::new();
    config
        .host(&host)
        .port(5432)
        .user(user)
        .password(password)
        .dbname("app")
        .connect_timeout(Duration::from_secs(3));
    let (client, connection) = config.connect(common::tls::encrypted()).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The superuser's session (`superuserAccess: true`).
async fn superuser(world: &World) -> tokio_postgres::Client {
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let secret = secrets
        .get(&format!("{CLUSTER}-superuser"))
        .await
        .expect("superuser secret");
    let password = common::tls::text(&secret, "password");
    connect_as(world, "postgres", &password)
        .await
        .expect("superuser connection")
}

async fn roles_status(world: &World) -> Vec<RoleStatus> {
    world.status(CLUSTER).await.roles
}

async fn wait_reconciled(world: &World, names: &[&str]) {
    wait_reconciled_in(world, CLUSTER, names).await;
}

/// Waits until `cluster`'s status reports every role of `names`
/// Reconciled: the primary's manager converges roles after the cluster
/// is ready, not before.
async fn wait_reconciled_in(world: &World, cluster: &str, names: &[&str]) {
    wait_for(
        &format!("{cluster}'s roles {names:?} Reconciled"),
        Duration::from_secs(90),
        || async {
            let roles = world.status(cluster).await.roles;
            names.iter().all(|name| {
                roles
                    .iter()
                    .any(|r| r.name == *name && r.state == RoleState::Reconciled)
            })
        },
    )
    .await;
}

/// What a write to the role catalogs would change: the next transaction
/// id (any write takes one) and each row's `xmin`.
async fn catalog_versions(admin: &tokio_postgres::Client) -> (String, Vec<String>) {
    let next: String = admin
        .query_one("SELECT pg_snapshot_xmax(pg_current_snapshot())::text", &[])
        .await
        .expect("snapshot")
        .get(0);
    let rows = admin
        .query(
            "SELECT rolname || ':' || xmin::text FROM pg_authid
             UNION ALL SELECT roleid::text || '>' || member::text || ':' || xmin::text FROM pg_auth_members
             UNION ALL SELECT objoid::text || ':' || xmin::text FROM pg_shdescription
             ORDER BY 1",
            &[],
        )
        .await
        .expect("catalogs");
    (next, rows.iter().map(|r| r.get(0)).collect())
}

async fn role_row(admin: &tokio_postgres::Client, name: &str) -> Option<(i32, bool, String)> {
    admin
        .query_opt(
            "SELECT rolconnlimit, rolcreatedb, xmin::text FROM pg_authid WHERE rolname = $1",
            &[&name],
        )
        .await
        .expect("pg_authid")
        .map(|r| (r.get(0), r.get(1), r.get(2)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_roles_are_kept_as_declared_and_others_left_alone() {
    let world = World::start().await;
    put_secret(&world, "batch-pw", BATCH_PASSWORD).await;
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 1,
                   "postgres": {"version": 15, "superuserAccess": true},
                   "storage": {"size": "1Gi"},
                   "roles": roles("present", 5)}),
        )
        .await;
    world.wait_ready(CLUSTER, 1).await;
    wait_reconciled(&world, &["readers", "web", "batch"]).await;

    // The application connects with the Secret Tusk generated.
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let generated = secrets.get("roles-role-web").await.expect("generated");
    let password = common::tls::text(&generated, "password");
    assert_eq!(common::tls::text(&generated, "username"), "web");
    assert_eq!(
        common::tls::text(&generated, "uri"),
        format!("postgresql://web:{password}@roles-rw.{NS}.svc:5432/app")
    );
    let web = connect_as(&world, "web", &password)
        .await
        .expect("web logs in with its generated password");
    let member: bool = web
        .query_one("SELECT pg_has_role('web', 'readers', 'MEMBER')", &[])
        .await
        .expect("membership")
        .get(0);
    assert!(member, "web is a member of readers");
    connect_as(&world, "batch", BATCH_PASSWORD)
        .await
        .expect("batch logs in with its quoted password");

    // A role made by hand, which no declaration names.
    let admin = superuser(&world).await;
    admin
        .batch_execute("CREATE ROLE handmade LOGIN CREATEDB PASSWORD 'by-hand'")
        .await
        .expect("a role by hand");
    let handmade = role_row(&admin, "handmade").await.expect("handmade");

    // Converged: two passes of the manager (every 10 s) write nothing.
    let before = catalog_versions(&admin).await;
    tokio::time::sleep(Duration::from_secs(25)).await;
    let after = catalog_versions(&admin).await;
    assert_eq!(
        before, after,
        "a converged cluster took a transaction id or rewrote a role"
    );
    println!("converged: 0 writes in 25 s (next xid {})", after.0);

    // A password changed in its Secret is taken; the old one stops working.
    put_secret(&world, "batch-pw", "second-password").await;
    wait_for(
        "batch logs in with its new password",
        Duration::from_secs(60),
        || async { connect_as(&world, "batch", "second-password").await.is_ok() },
    )
    .await;
    assert!(connect_as(&world, "batch", BATCH_PASSWORD).await.is_err());
    // The probe above sees a single password write: it can fail.
    assert_ne!(
        catalog_versions(&admin).await,
        after,
        "the password write shows in the catalogs"
    );

    // An attribute changed in the spec, and one changed by hand, follow
    // the declaration.
    set_roles(&world, roles("present", 7)).await;
    admin
        .batch_execute("ALTER ROLE web CREATEDB")
        .await
        .expect("altered by hand");
    wait_for(
        "web's connection limit 7 and no CREATEDB",
        Duration::from_secs(60),
        || async { role_row(&admin, "web").await.map(|r| (r.0, r.1)) == Some((7, false)) },
    )
    .await;

    // Dropped when declared absent.
    set_roles(&world, roles("absent", 7)).await;
    wait_for("batch dropped", Duration::from_secs(60), || async {
        role_row(&admin, "batch").await.is_none()
    })
    .await;
    wait_reconciled(&world, &["readers", "web", "batch"]).await;

    // A role whose Secret does not exist is reported with the reason.
    let mut with_missing = roles("absent", 7);
    with_missing
        .as_array_mut()
        .expect("a list")
        .push(json!({"name": "late", "login": true, "passwordSecret": {"name": "late-pw"}}));
    set_roles(&world, with_missing).await;
    wait_for(
        "late Failed naming its Secret",
        Duration::from_secs(60),
        || async {
            roles_status(&world).await.iter().any(|r| {
                r.name == "late"
                    && r.state == RoleState::Failed
                    && r.reason.as_deref() == Some("Secret late-pw does not exist")
            })
        },
    )
    .await;

    // The hand-made role is exactly as it was made.
    assert_eq!(role_row(&admin, "handmade").await, Some(handmade));
    connect_as(&world, "handmade", "by-hand")
        .await
        .expect("handmade still logs in with its own password");

    // No password anywhere in status.
    let status = serde_json::to_string(&world.status(CLUSTER).await).expect("json");
    for secret in [BATCH_PASSWORD, "second-password", password.as_str()] {
        assert!(!status.contains(secret), "a password in status");
    }
    world.shutdown().await;
}

/// After a failover the new primary's manager keeps the declared roles:
/// it reads the password Secret (its Role allows it as the old
/// primary's did) and takes a password changed after the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_primary_keeps_the_declared_roles() {
    const HA: &str = "roles-ha";
    let world = World::start().await;
    put_secret(&world, "ha-pw", "before-failover").await;
    let mut spec = common::durable_cluster(1);
    spec["instances"] = json!(2);
    spec["roles"] = json!([{"name": "app_user", "login": true,
                            "passwordSecret": {"name": "ha-pw"}}]);
    world.create_cluster(HA, spec).await;
    world.wait_replicating(HA, 2).await;
    wait_reconciled_in(&world, HA, &["app_user"]).await;
    connect_to(&world, HA, "app_user", "before-failover")
        .await
        .expect("app_user logs in");

    let old = world.status(HA).await.current_primary.expect("a primary");
    let faults = world.node.as_ref().expect("node").faults();
    let started = tokio::time::Instant::now();
    loop {
        // Not running between restarts: nothing to kill then.
        let _ = faults.kill(NS, &old, "postgres");
        let s = world.status(HA).await;
        if s.target_primary.as_ref().is_some_and(|t| *t != old) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no failover from {old}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_for(
        "the new primary serves",
        Duration::from_secs(90),
        || async {
            let s = world.status(HA).await;
            s.current_primary.is_some() && s.current_primary == s.target_primary
        },
    )
    .await;
    let new = world.status(HA).await.current_primary.expect("a primary");
    println!("failover {old} -> {new}");

    put_secret(&world, "ha-pw", "after-failover").await;
    wait_for(
        "app_user logs in with the password set by the new primary",
        Duration::from_secs(90),
        || async {
            connect_to(&world, HA, "app_user", "after-failover")
                .await
                .is_ok()
        },
    )
    .await;
    world.shutdown().await;
}
