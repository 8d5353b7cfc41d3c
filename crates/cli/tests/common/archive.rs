//! What the end-to-end tests that need object storage share: a cluster
//! archiving to the tests' S3-compatible server over HTTPS with a private
//! CA, a superuser session, and the `tusk` command against the sandbox.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{ApiServer, NS, World};
use crate::stores::S3Server;

pub async fn create_secret(
    world: &impl ApiServer,
    ns: &str,
    name: &str,
    data: BTreeMap<String, String>,
) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    }))
    .expect("a secret");
    Api::<Secret>::namespaced(world.kube().clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret created");
}

/// Creates, in `ns`, the Secrets holding `server`'s keys and CA for
/// cluster `name`: `<name>-s3` and `<name>-s3-ca`.
pub async fn create_s3_secrets(world: &impl ApiServer, server: &S3Server, ns: &str, name: &str) {
    let keys = server.keys();
    create_secret(
        world,
        ns,
        &format!("{name}-s3"),
        BTreeMap::from([
            ("ACCESS_KEY_ID".to_owned(), keys.access_key_id.clone()),
            (
                "SECRET_ACCESS_KEY".to_owned(),
                keys.secret_access_key.clone(),
            ),
        ]),
    )
    .await;
    let ca = std::fs::read_to_string(&server.served.ca_file).expect("the CA");
    create_secret(
        world,
        ns,
        &format!("{name}-s3-ca"),
        BTreeMap::from([("ca.crt".to_owned(), ca)]),
    )
    .await;
}

/// `server`'s bucket `wal` as an object store, with the Secrets
/// [`create_s3_secrets`] made for `name`.
pub fn object_store(server: &S3Server, name: &str) -> serde_json::Value {
    json!({
        "url": "s3://wal/e2e",
        "endpoint": format!("https://{}:{}", server.served.host, server.served.port),
        "region": server.served.region,
        "credentialsSecret": format!("{name}-s3"),
        "caSecret": format!("{name}-s3-ca")})
}

/// Creates, in `ns`, the claim `name` of a volume every instance may
/// mount (ReadWriteMany), for `file://` repositories.
pub async fn create_shared_claim(world: &World, ns: &str, name: &str) {
    let claim: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .expect("a claim");
    Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(world.kube().clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim created");
}

/// Creates the cluster `name` (one instance of PostgreSQL 15) archiving to
/// `server`'s bucket `wal`, with `backup` merged into its `spec.backup`.
pub async fn create_archiving_cluster(
    world: &World,
    server: &S3Server,
    name: &str,
    backup: serde_json::Value,
) {
    create_s3_secrets(world, server, NS, name).await;
    let mut spec = json!({"destination": object_store(server, name)});
    for (key, value) in backup.as_object().cloned().unwrap_or_default() {
        spec[key] = value;
    }
    world
        .create_cluster(
            name,
            json!({"instances": 1, "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
                   "storage": {"size": "1Gi"},
                   "backup": spec}),
        )
        .await;
}

/// A superuser session on the primary of `cluster` in `ns` (switching WAL
/// is a superuser's).
pub async fn superuser(world: &impl ApiServer, ns: &str, cluster: &str) -> tokio_postgres::Client {
    let secret = Api::<Secret>::namespaced(world.kube().clone(), ns)
        .get(&format!("{cluster}-superuser"))
        .await
        .expect("superuser secret");
    let field = |key: &str| {
        let data = secret.data.clone().unwrap_or_default();
        String::from_utf8(data.get(key).expect("key").0.clone()).expect("UTF-8")
    };
    let host = Api::<Service>::namespaced(world.kube().clone(), ns)
        .get(&format!("{cluster}-rw"))
        .await
        .expect("the -rw Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");
    let config = format!(
        "host={host} port=5432 user={} password={} dbname=postgres connect_timeout=5",
        field("username"),
        field("password")
    );
    let (client, connection) = tokio_postgres::connect(&config, crate::common::tls::encrypted())
        .await
        .expect("superuser connection");
    tokio::spawn(connection);
    client
}

/// Finishes the current WAL segment of `cluster`'s primary and waits, at
/// most `limit`, until status records it archived with
/// `ContinuousArchiving` True; the segment's name.
pub async fn switch_wal_and_wait_archived(world: &World, cluster: &str, limit: Duration) -> String {
    let primary = superuser(world, NS, cluster).await;
    let segment = switch_wal(&primary).await;
    crate::common::wait_for(
        &format!("{segment} of {cluster} archived"),
        limit,
        || async {
            let status = world.status(cluster).await;
            let archived = status
                .backup
                .and_then(|b| b.last_archived_wal)
                .is_some_and(|archived| archived >= segment);
            archived
                && tusk_api::conditions::is_true(
                    &status.conditions,
                    tusk_api::conditions::CONTINUOUS_ARCHIVING,
                )
        },
    )
    .await;
    segment
}

/// Switches the primary of `cluster` to a new WAL segment and waits (at
/// most `limit`) until its archiver says pgBackRest stored it
/// (`pg_stat_archiver`: `archive_command` returned success, which
/// pgBackRest does once the segment is in the repository). Quicker than
/// [`switch_wal_and_wait_archived`], which waits for the status (refreshed
/// at the operator's next look, up to a minute on a converged cluster):
/// for tests about the repository rather than the status. The segment.
pub async fn switch_wal_and_wait_stored(
    world: &impl ApiServer,
    cluster: &str,
    limit: Duration,
) -> String {
    let primary = superuser(world, NS, cluster).await;
    let segment = switch_wal(&primary).await;
    crate::common::wait_for(&format!("{segment} of {cluster} stored"), limit, || async {
        primary
            .query_one(
                "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver",
                &[],
            )
            .await
            .is_ok_and(|row| row.get::<_, String>(0) >= segment)
    })
    .await;
    segment
}

/// Switches `primary` to a new WAL segment; the finished one's name.
async fn switch_wal(primary: &tokio_postgres::Client) -> String {
    primary
        .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
        .await
        .expect("switch")
        .get(0)
}

/// `tusk args` against the world, killed after `limit`.
pub async fn tusk(world: &impl ApiServer, args: &[&str], limit: Duration) -> std::process::Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tusk"));
    command
        .args(args)
        .env("KUBECONFIG", world.kubeconfig_path())
        .kill_on_drop(true);
    tokio::time::timeout(limit, command.output())
        .await
        .unwrap_or_else(|_| panic!("tusk {args:?} did not finish within {limit:?}"))
        .unwrap_or_else(|e| panic!("tusk {args:?} cannot run: {e}"))
}

/// Runs `tusk` with `args`, which must succeed; what it printed.
pub async fn tusk_ok(world: &impl ApiServer, args: &[&str], limit: Duration) -> String {
    let output = tusk(world, args, limit).await;
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "tusk {args:?}: {said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    said
}

/// An object store's end-to-end cycle ([`archive_back_up_restore_and_refuse`]).
pub struct StoreCycle<'a> {
    /// The cluster archiving with the right keys; `<name>-copy` is restored
    /// from it, `<name>-refused` archives with the wrong ones.
    pub name: &'a str,
    /// The destination's URL, as `ContinuousArchiving` names it.
    pub url: &'a str,
    /// The destination signed in to with the keys of the Secret named.
    pub destination: &'a dyn Fn(&str) -> serde_json::Value,
    /// The Secrets of the right keys and of keys the store refuses.
    pub keys_secret: &'a str,
    pub refused_secret: &'a str,
    /// What the refused cluster's condition says of the refusal, and what
    /// it must never hold (the key).
    pub refusal: &'a str,
    pub never: &'a str,
}

/// One instance of PostgreSQL 15 archiving to `destination`, restored
/// from `source` (the cluster, its destination) when given.
fn archiving_cluster(
    destination: serde_json::Value,
    source: Option<(&str, serde_json::Value)>,
) -> serde_json::Value {
    let mut spec = json!({"instances": 1,
        "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}, "superuserAccess": true},
        "storage": {"size": "1Gi"},
        "backup": {"destination": destination}});
    if let Some((cluster, source)) = source {
        spec["bootstrap"] = json!({"recovery": {"cluster": cluster, "source": source}});
    }
    spec
}

/// `ContinuousArchiving` of `name`: status and message.
async fn continuous_archiving(world: &World, name: &str) -> Option<(String, String)> {
    let status = world.status(name).await;
    let condition = status
        .conditions
        .into_iter()
        .find(|c| c.type_ == tusk_api::conditions::CONTINUOUS_ARCHIVING)?;
    Some((condition.status, condition.message))
}

/// The cycle through the operator on one store (its Secrets created): a
/// cluster archives there (`ContinuousArchiving` True, naming the URL),
/// `tusk backup` completes, rows written after it are stored, and a new
/// cluster restored from the store has every row; a cluster given keys
/// the store refuses says so in `ContinuousArchiving`, naming the Secret
/// and the refusal, never the key.
pub async fn archive_back_up_restore_and_refuse(world: &World, cycle: StoreCycle<'_>) {
    let wait = Duration::from_secs(240);
    let name = cycle.name;
    let refused = format!("{name}-refused");
    let copy = format!("{name}-copy");
    let good = (cycle.destination)(cycle.keys_secret);
    world
        .create_cluster(name, archiving_cluster(good.clone(), None))
        .await;
    world
        .create_cluster(
            &refused,
            archiving_cluster((cycle.destination)(cycle.refused_secret), None),
        )
        .await;
    crate::common::wait_for(&format!("{name} archiving"), wait, || async {
        continuous_archiving(world, name)
            .await
            .is_some_and(|(s, _)| s == "True")
    })
    .await;
    let (_, message) = continuous_archiving(world, name)
        .await
        .expect("the condition");
    assert!(message.contains(cycle.url), "{message}");

    let backup = format!("{name}-now");
    let said = tusk_ok(
        world,
        &["backup", name, "-n", NS, "--name", &backup, "--wait", "300"],
        Duration::from_secs(330),
    )
    .await;
    assert!(
        said.contains(&format!("{backup}: Completed on {name}-1: backup ")),
        "{said}"
    );
    superuser(world, NS, name)
        .await
        .batch_execute("CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)")
        .await
        .expect("rows after the backup");
    switch_wal_and_wait_stored(world, name, wait).await;

    world
        .create_cluster(&copy, archiving_cluster(good.clone(), Some((name, good))))
        .await;
    world.wait_ready(&copy, 1).await;
    let rows: i64 = superuser(world, NS, &copy)
        .await
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 100, "every row archived before the restore");

    crate::common::wait_for(&format!("{refused} not archiving"), wait, || async {
        continuous_archiving(world, &refused)
            .await
            .is_some_and(|(s, _)| s == "False")
    })
    .await;
    let (_, message) = continuous_archiving(world, &refused)
        .await
        .expect("the refused cluster's condition");
    assert!(
        message.contains(&format!("Secret {}", cycle.refused_secret))
            && message.contains(cycle.refusal),
        "{message}"
    );
    assert!(!message.contains(cycle.never), "no key in the condition");
}
