//! An invalid spec never takes a running cluster down, on the full sandbox
//! with real PostgreSQL. A typo the API server admits (a parameter value
//! PostgreSQL would refuse) is reported as `InvalidSpec`, naming the field,
//! and nothing of it is applied; meanwhile the operator keeps the cluster
//! as the last valid spec declared it: a lost primary pod is recreated
//! (or failed over from, whichever comes first), and the cluster serves
//! writes and reads again. A
//! restarted operator does the same, from what status recorded. Once the
//! spec is fixed, the cluster converges to it.

mod common;

use std::time::Duration;

use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

const CLUSTER: &str = "typo";
/// The condition message names the refused field.
const FIELD: &str = "spec.postgres.parameters.shared_buffers";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_an_invalid_spec_recovers_a_lost_pod_as_last_declared_valid() {
    let mut world = World::start().await;
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 2,
                   "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                   "storage": {"size": "1Gi"},
                   "failover": {"delaySeconds": 2, "dataDurability": "preferred"}}),
        )
        .await;
    world.wait_ready(CLUSTER, 2).await;
    let writer = world.connect(&format!("{CLUSTER}-rw"), CLUSTER).await;
    writer
        .batch_execute("create table orders (id int primary key)")
        .await
        .expect("a table");
    drop(writer);

    let valid_generation = generation(&world).await;
    set_shared_buffers(&world, "Retain").await;
    wait_for(
        "InvalidSpec naming the field",
        Duration::from_secs(60),
        || async { invalid_spec_reported(&world).await },
    )
    .await;

    let status = world.status(CLUSTER).await;
    assert_eq!(
        status.last_valid_spec.map(|r| r.generation),
        Some(valid_generation),
        "the last valid spec is on record"
    );
    the_commands_say_what_is_refused_and_kept(&world, valid_generation).await;

    pod_lost_and_cluster_serves(&world, 1).await;
    assert!(
        invalid_spec_reported(&world).await,
        "the spec is still invalid: {:#?}",
        world.status(CLUSTER).await.conditions
    );

    world.restart_operator().await;
    pod_lost_and_cluster_serves(&world, 2).await;
    assert!(
        invalid_spec_reported(&world).await,
        "the restarted operator reports the invalid spec: {:#?}",
        world.status(CLUSTER).await.conditions
    );

    set_shared_buffers(&world, "32MB").await;
    // shared_buffers takes a restart, which the operator rolls through
    // the instances once they report it pending.
    wait_for(
        "the fixed value in effect on the primary",
        Duration::from_secs(240),
        || async { shared_buffers(&world).await.as_deref() == Some("32MB") },
    )
    .await;
    wait_for(
        "the fixed spec converged",
        Duration::from_secs(240),
        || async { converged(&world).await },
    )
    .await;
    let recorded = world.status(CLUSTER).await.last_valid_spec;
    assert_eq!(
        recorded.map(|r| r.generation),
        Some(generation(&world).await),
        "the fixed spec is the last valid one"
    );
    world.shutdown().await;
}

async fn generation(world: &World) -> i64 {
    let cluster = world.clusters().get(CLUSTER).await.expect("cluster");
    cluster.metadata.generation.expect("a generation")
}

/// A Warning event, `tusk why`, `tusk status` and `tusk plan` name the
/// refused field; status and the plan the generation kept, which the
/// plan's steps maintain (nothing held).
async fn the_commands_say_what_is_refused_and_kept(world: &World, kept: i64) {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(world.client.clone(), NS);
    let listed = events.list(&Default::default()).await.expect("events");
    let warned = listed.items.iter().any(|e| {
        e.involved_object.name.as_deref() == Some(CLUSTER)
            && e.type_.as_deref() == Some("Warning")
            && e.reason.as_deref() == Some("InvalidSpec")
            && e.message.as_deref().is_some_and(|m| m.contains(FIELD))
    });
    assert!(
        warned,
        "an InvalidSpec event: {}",
        world.story(CLUSTER).await
    );
    let (why, _) = tusk(world, &["why", CLUSTER]).await;
    assert!(why.contains(FIELD), "{why}");
    let (status, _) = tusk(world, &["status", CLUSTER]).await;
    assert!(
        status.contains(&format!("kept as generation {kept}")) && status.contains(FIELD),
        "{status}"
    );
    let (plan, planned) = tusk(world, &["plan", CLUSTER, "-o", "json"]).await;
    assert!(planned, "tusk plan failed: {plan}");
    let plan: serde_json::Value = serde_json::from_str(&plan).expect("JSON");
    let refused = plan["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains(FIELD) && refused.contains(&format!("generation {kept}")),
        "{plan}"
    );
    assert!(plan["held"].is_null(), "{plan}");
}

/// `tusk args` with the operator's settings (the test's operator runs in
/// process, with no Deployment to read them from): its standard output
/// and whether it succeeded.
async fn tusk(world: &World, args: &[&str]) -> (String, bool) {
    let config = world.operator_config();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tusk"));
    command
        .args(args)
        .env("KUBECONFIG", world.kubeconfig())
        .env("TUSK_POSTGRES_UID", config.postgres_uid.to_string())
        .env("TUSK_POSTGRES_GID", config.postgres_gid.to_string())
        .env(
            "TUSK_DEFAULT_POSTGRES_IMAGE",
            &config.default_postgres_image,
        )
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap_or_else(|_| panic!("tusk {args:?} did not finish within 60 s"))
        .unwrap_or_else(|e| panic!("tusk {args:?} cannot run: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (format!("{stdout}{stderr}"), output.status.success())
}

/// `shared_buffers` as the primary shows it, through `-rw`.
async fn shared_buffers(world: &World) -> Option<String> {
    let client = world.connect(&format!("{CLUSTER}-rw"), CLUSTER).await;
    let row = client.query_one("show shared_buffers", &[]).await.ok()?;
    row.try_get(0).ok()
}

async fn set_shared_buffers(world: &World, value: &str) {
    let patch = json!({"spec": {"postgres": {"parameters": {"shared_buffers": value}}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the API server admits the value");
}

/// The `Degraded` condition says `InvalidSpec`, naming the field.
async fn invalid_spec_reported(world: &World) -> bool {
    world
        .status(CLUSTER)
        .await
        .conditions
        .iter()
        .any(|c| c.type_ == "Degraded" && c.reason == "InvalidSpec" && c.message.contains(FIELD))
}

/// Deletes the primary's pod; waits for it to be recreated and for the
/// cluster to take a write through `-rw` and serve it through `-ro`.
async fn pod_lost_and_cluster_serves(world: &World, round: i32) {
    let primary = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    let uid = pods.get(&primary).await.expect("the primary's pod").uid();
    pods.delete(&primary, &DeleteParams::default())
        .await
        .expect("pod deleted");
    let started = std::time::Instant::now();
    let recreated = || async {
        let pod = pods.get_opt(&primary).await.ok().flatten();
        let s = world.status(CLUSTER).await;
        pod.is_some_and(|p| p.uid() != uid)
            && s.ready_instances == 2
            && s.current_primary.is_some()
            && s.current_primary == s.target_primary
    };
    let limit = Duration::from_secs(180);
    if tokio::time::timeout(limit, async {
        while !recreated().await {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await
    .is_err()
    {
        panic!(
            "round {round}: {primary} not recreated with 2 ready instances within {limit:?}: \
             {:#?}\n{}",
            world.status(CLUSTER).await,
            world.story(CLUSTER).await
        );
    }
    println!(
        "round {round}: {primary} recreated and the cluster ready in {:?}",
        started.elapsed()
    );
    let client = world.connect(&format!("{CLUSTER}-rw"), CLUSTER).await;
    client
        .execute("insert into orders values ($1)", &[&round])
        .await
        .expect("a write through -rw");
    wait_for(
        "the write read through -ro",
        Duration::from_secs(60),
        || async {
            let reader = world.connect(&format!("{CLUSTER}-ro"), CLUSTER).await;
            reader
                .query_opt("select id from orders where id = $1", &[&round])
                .await
                .is_ok_and(|row| row.is_some())
        },
    )
    .await;
}

/// The fixed spec observed and applied: no `InvalidSpec`, every instance
/// ready.
async fn converged(world: &World) -> bool {
    let cluster = world.clusters().get(CLUSTER).await.expect("cluster");
    let s = cluster.status.clone().unwrap_or_default();
    s.observed_generation == cluster.metadata.generation
        && s.ready_instances == 2
        && s.rollout.is_none()
        && !s.conditions.iter().any(|c| c.reason == "InvalidSpec")
        && s.phase == Some(tusk_api::v1alpha1::ClusterPhase::Ready)
}
