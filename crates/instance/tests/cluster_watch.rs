//! The desired state read from the API: a real API server (the sandbox),
//! a PostgresCluster and pods, the instance manager's watch, and a manager
//! with real PostgreSQL driven by it.

mod common;

use common::api::{api_server, install_crds, pod_with_ip, set_pod_ip};

use std::net::IpAddr;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tusk_api::instance::{InstancePhase, InstanceRole};
use tusk_api::v1alpha1::PostgresCluster;
use tusk_instance::cluster_watch;
use tusk_instance::desired::DesiredState;

const WAIT: Duration = Duration::from_secs(20);

async fn wait_for(
    receiver: &mut watch::Receiver<Option<DesiredState>>,
    what: &str,
    check: impl Fn(&DesiredState) -> bool,
) -> DesiredState {
    let outcome = tokio::time::timeout(WAIT, receiver.wait_for(|d| d.as_ref().is_some_and(&check)))
        .await
        .map(|found| found.map(|state| state.clone()));
    match outcome {
        Ok(Ok(Some(state))) => state,
        Ok(_) => panic!("the watch stopped while waiting for {what}"),
        Err(_) => panic!(
            "timed out waiting for {what}; last: {:?}",
            *receiver.borrow()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_follows_target_primary_its_address_fencing_and_parameters() {
    let (_dir, _sandbox, client) = api_server().await;
    install_crds(&client).await;
    pod_with_ip(&client, "db-1", "10.1.0.1").await;
    pod_with_ip(&client, "db-2", "10.1.0.2").await;

    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), "default");
    let cluster: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "db"},
        "spec": {
            "instances": 2,
            "postgres": {"version": 15, "parameters": {"work_mem": "8MB"}},
            "storage": {"size": "1Gi"},
        },
    }))
    .expect("a cluster");
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("cluster created");

    let mut desired = cluster_watch::start_with_client(
        client.clone(),
        "default",
        "db",
        "db-2",
        &tusk_api::contract::MountDirs::in_pod(),
    );
    let first = wait_for(&mut desired, "the cluster", |_| true).await;
    assert_eq!(first.target_primary, None, "no primary chosen yet");
    assert_eq!(
        first.parameters.get("work_mem").map(String::as_str),
        Some("8MB")
    );
    assert!(!first.fenced);

    let status = |target: &str| Patch::Merge(json!({"status": {"targetPrimary": target}}));
    clusters
        .patch_status("db", &PatchParams::default(), &status("db-1"))
        .await
        .expect("status patched");
    let ip = |text: &str| text.parse::<IpAddr>().expect("an address");
    wait_for(&mut desired, "db-1 at its pod IP", |d| {
        d.target_primary.as_deref() == Some("db-1") && d.primary_address == Some(ip("10.1.0.1"))
    })
    .await;

    // The primary's pod comes back with a new address: followed without any
    // change to the cluster.
    set_pod_ip(&client, "db-1", "10.1.0.9").await;
    wait_for(&mut desired, "db-1's new address", |d| {
        d.primary_address == Some(ip("10.1.0.9"))
    })
    .await;

    clusters
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"tusk.dev/fenced-instances": "[\"db-2\"]"}},
                "spec": {"postgres": {"parameters": {"work_mem": "16MB"}}},
            })),
        )
        .await
        .expect("cluster patched");
    wait_for(&mut desired, "fenced with new parameters", |d| {
        d.fenced && d.parameters.get("work_mem").map(String::as_str) == Some("16MB")
    })
    .await;

    clusters
        .patch_status("db", &PatchParams::default(), &status("db-2"))
        .await
        .expect("status patched");
    wait_for(&mut desired, "db-2 as primary", |d| {
        d.target_primary.as_deref() == Some("db-2") && d.primary_address == Some(ip("10.1.0.2"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_manager_converges_to_what_the_api_declares() {
    common::init_logs();
    let (_dir, _sandbox, client) = api_server().await;
    install_crds(&client).await;
    let mut cluster = common::TestCluster::new();
    let mut primary = cluster.instance("db-1");
    pod_with_ip(&client, "db-1", &primary.address.to_string()).await;
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), "default");
    let declared: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "db"},
        "spec": {
            "instances": 1,
            "postgres": {"version": 15, "parameters": common::test_parameters()},
            "storage": {"size": "1Gi"},
        },
    }))
    .expect("a cluster");
    clusters
        .create(&PostParams::default(), &declared)
        .await
        .expect("cluster created");
    clusters
        .patch_status(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"targetPrimary": "db-1"}})),
        )
        .await
        .expect("status patched");

    primary.start_with(cluster_watch::start_with_client(
        client.clone(),
        "default",
        "db",
        "db-1",
        &tusk_api::contract::MountDirs::in_pod(),
    ));
    let report = primary
        .wait_status("the declared primary", Duration::from_secs(60), |r| r.ready)
        .await;
    assert_eq!(report.role, InstanceRole::Primary);
    assert_eq!(report.target_primary.as_deref(), Some("db-1"));

    let fence = |value: Option<&str>| {
        Patch::Merge(json!({"metadata": {"annotations": {"tusk.dev/fenced-instances": value}}}))
    };
    clusters
        .patch("db", &PatchParams::default(), &fence(Some("*")))
        .await
        .expect("fenced");
    primary
        .wait_status("fenced through the API", WAIT, |r| {
            r.phase == InstancePhase::Fenced && r.role == InstanceRole::Stopped
        })
        .await;
    clusters
        .patch("db", &PatchParams::default(), &fence(None))
        .await
        .expect("unfenced");
    primary
        .wait_status("running again", WAIT, |r| r.ready)
        .await;
    primary.stop(Duration::from_secs(30)).await;
}
