//! A volume kept by `deletionPolicy: Retain` is never adopted (R15, issue
//! 15), on the full sandbox with real PostgreSQL: a cluster writes a row
//! and is deleted; a new cluster of the same name reports the conflict,
//! starts no instance on the old volume, and the row is still on it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{NS, World, wait_for};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};

const CLUSTER: &str = "kept";

/// Whether any file under `dir` contains `needle`.
fn contains(dir: &Path, needle: &[u8]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            contains(&path, needle)
        } else {
            std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_cluster_leaves_the_retained_volume_and_its_data_alone() {
    let world = World::start().await;
    let spec = serde_json::json!({"instances": 1,
        "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
        "storage": {"size": "1Gi"}});
    world.create_cluster(CLUSTER, spec.clone()).await;
    world.wait_ready(CLUSTER, 1).await;
    let marker = format!("retained-row-{}", std::process::id());
    world
        .connect(&format!("{CLUSTER}-rw"), CLUSTER)
        .await
        .execute("create table notes as select $1::text as note", &[&marker])
        .await
        .expect("a row");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(world.client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    let claim_name = format!("{CLUSTER}-1");
    let old = claims.get(&claim_name).await.expect("the claim");
    let volume = old
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .expect("a bound volume");

    world
        .clusters()
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(
        "the cluster and its pod gone",
        Duration::from_secs(90),
        || async {
            world
                .clusters()
                .get_opt(CLUSTER)
                .await
                .ok()
                .flatten()
                .is_none()
                && pods.get_opt(&claim_name).await.ok().flatten().is_none()
        },
    )
    .await;

    world.create_cluster(CLUSTER, spec).await;
    let new_uid = world
        .clusters()
        .get(CLUSTER)
        .await
        .expect("the new cluster")
        .uid()
        .expect("uid");
    wait_for("the conflict reported", Duration::from_secs(60), || async {
        world.status(CLUSTER).await.conditions.iter().any(|c| {
            c.type_ == "Degraded"
                && c.status == "True"
                && c.reason == "VolumeConflict"
                && c.message.contains(&claim_name)
        })
    })
    .await;
    // A few more passes: still nothing runs on the old volume.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        pods.get_opt(&claim_name).await.expect("read").is_none(),
        "no instance of the new cluster runs on the retained volume"
    );
    let after = claims.get(&claim_name).await.expect("the retained claim");
    assert_eq!(after.uid(), old.uid(), "the same claim, not a new one");
    assert_ne!(
        after.labels().get("tusk.dev/cluster-uid"),
        Some(&new_uid),
        "not taken over by the new cluster"
    );
    assert!(after.owner_references().is_empty());
    let pgdata = world
        .dir
        .path()
        .join("volumes")
        .join(&volume)
        .join("pgdata");
    assert!(
        contains(&pgdata, marker.as_bytes()),
        "the row is still in the retained volume {}",
        pgdata.display()
    );
    world.shutdown().await;
}
