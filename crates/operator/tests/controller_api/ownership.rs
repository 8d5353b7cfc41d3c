//! What the operator deletes or releases is what it made: a pod
//! counts as an instance only when the cluster owns it, not because it
//! carries the cluster's labels, so a labelled debug pod never gets a
//! retained claim of its name deleted by a scale-down; and a claim
//! released under `deletionPolicy: Retain` loses the cluster's owner
//! reference alone, keeping any other owner's.

use k8s_openapi::api::core::v1::ConfigMap;

use crate::instances::Instances;
use crate::support::*;

/// A pod with the cluster's labels, as someone debugging would copy them,
/// and no owner.
fn debug_pod(cluster: &str, name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "tusk.dev/cluster": cluster, "tusk.dev/instance": name}},
        "spec": {"containers": [{"name": "postgres", "image": "postgres:15"}]}
    }))
    .expect("a pod")
}

/// A claim kept by an earlier cluster of that name under `Retain`.
fn retained_claim(cluster: &str, name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "tusk.dev/cluster": cluster, "tusk.dev/instance": name,
            "tusk.dev/cluster-uid": "an-earlier-cluster", "tusk.dev/retained": "true"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("a claim")
}

#[tokio::test]
async fn a_labelled_pod_the_cluster_does_not_own_is_no_instance_to_scale_down() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let _instances = Instances::start(&h.client, "dbg", &["dbg-1"]).await;
    let mut spec = small();
    spec["deletionPolicy"] = json!("Delete");
    create(&h.client, "dbg", spec).await;
    wait_for("the cluster serves", || async {
        get::<PostgresCluster>(&h.client, "dbg")
            .await
            .and_then(|c| c.status)
            .is_some_and(|s| s.instances.iter().filter(|i| i.ready).count() == 1)
    })
    .await;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), NS);
    claims
        .create(&PostParams::default(), &retained_claim("dbg", "dbg-7"))
        .await
        .expect("the retained claim");
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), NS);
    pods.create(&PostParams::default(), &debug_pod("dbg", "dbg-7"))
        .await
        .expect("the debug pod");

    // A pass after both exist (a spec change it must observe), then a
    // few more seconds for a scale-down to have happened.
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .patch(
            "dbg",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"postgres": {"parameters": {"work_mem": "8MB"}}}})),
        )
        .await
        .expect("a spec change");
    wait_for("the change observed", || async {
        observed_generation(&h.client, "dbg").await == Some(2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        get::<PersistentVolumeClaim>(&h.client, "dbg-7")
            .await
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "the retained claim dbg-7 was deleted for a pod the cluster does not own"
    );
    assert!(
        get::<Pod>(&h.client, "dbg-7")
            .await
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "the debug pod was deleted"
    );
    let status = get::<PostgresCluster>(&h.client, "dbg")
        .await
        .and_then(|c| c.status)
        .expect("status");
    assert!(
        status.instances.iter().all(|i| i.name != "dbg-7"),
        "{:?}",
        status.instances
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_retained_claim_keeps_its_other_owners() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "kept", small()).await;
    wait_for("the claim", || async {
        get::<PersistentVolumeClaim>(&h.client, "kept-1")
            .await
            .is_some()
    })
    .await;
    let maps: Api<ConfigMap> = Api::namespaced(h.client.clone(), NS);
    let holder: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "holder"}})).expect("a config map");
    let holder = maps
        .create(&PostParams::default(), &holder)
        .await
        .expect("the other owner");
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "holder",
                       "uid": holder.uid().expect("uid")});
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), NS);
    let claim = claims.get("kept-1").await.expect("the claim");
    let mut owners = serde_json::to_value(claim.owner_references()).expect("owners");
    owners.as_array_mut().expect("a list").push(other.clone());
    claims
        .patch(
            "kept-1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"ownerReferences": owners}})),
        )
        .await
        .expect("a second owner");

    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .delete("kept", &DeleteParams::default())
        .await
        .expect("deleted");
    wait_for("the cluster gone", || async {
        get::<PostgresCluster>(&h.client, "kept").await.is_none()
    })
    .await;
    let claim = get::<PersistentVolumeClaim>(&h.client, "kept-1")
        .await
        .expect("the claim is retained");
    assert_eq!(
        claim.labels().get("tusk.dev/retained").map(String::as_str),
        Some("true")
    );
    let owners: Vec<&str> = claim
        .owner_references()
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(
        owners,
        ["holder"],
        "only the cluster's reference is removed"
    );
    operator.stop().await;
}
