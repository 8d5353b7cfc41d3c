//! Volumes hold the data, so no path through the operator or garbage
//! collection takes them by accident (R13, R15): a claim made
//! before claims recorded their cluster's uid stays the cluster's, and a
//! deletion that skips the operator's cleanup leaves a `Retain` cluster's
//! data.

use crate::support::*;

/// A claim as operators before the uid label made it: the cluster's
/// label and owner reference, no `tusk.dev/cluster-uid`.
fn legacy_claim(name: &str, owner: &PostgresCluster) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("{name}-1"),
            "labels": {"tusk.dev/cluster": name, "app.kubernetes.io/managed-by": "tusk",
                       "tusk.dev/instance": format!("{name}-1")},
            "ownerReferences": [{
                "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                "name": name, "uid": owner.uid().expect("uid"), "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("a claim")
}

#[tokio::test]
async fn a_claim_from_before_the_uid_label_stays_the_clusters_under_retain() {
    let h = sandbox(true).await;
    let created = create(&h.client, "legacy", small()).await;
    let uid = created.uid().expect("uid");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), NS);
    claims
        .create(&PostParams::default(), &legacy_claim("legacy", &created))
        .await
        .expect("the claim of an existing cluster");
    let operator = Operator::start(&h.client, None);
    wait_for(
        "the claim free of its owner and labelled with the uid",
        || async {
            get::<PersistentVolumeClaim>(&h.client, "legacy-1")
                .await
                .is_some_and(|c| {
                    c.owner_references().is_empty()
                        && c.labels().get("tusk.dev/cluster-uid") == Some(&uid)
                })
        },
    )
    .await;
    // Later passes still count the volume as the cluster's.
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"postgres": {"parameters": {"work_mem": "8MB"}}}})),
        )
        .await
        .expect("a spec change");
    wait_for("the change observed", || async {
        observed_generation(&h.client, "legacy").await == Some(2)
    })
    .await;
    let degraded = condition(&h.client, "legacy", "Degraded").await;
    assert!(
        degraded
            .as_ref()
            .is_none_or(|(_, reason, _)| reason != "VolumeConflict"),
        "{degraded:?}"
    );
    assert!(get::<Pod>(&h.client, "legacy-1").await.is_some());
    operator.stop().await;
}

#[tokio::test]
async fn a_deletion_that_skips_cleanup_leaves_a_retained_clusters_data() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let mut delete = small();
    delete["deletionPolicy"] = json!("Delete");
    create(&h.client, "kept", small()).await;
    create(&h.client, "gone", delete).await;
    wait_for("children of both", || async {
        children_exist(&h.client, "kept").await && children_exist(&h.client, "gone").await
    })
    .await;
    // The operator is away and someone removes the finalizers: garbage
    // collection alone decides what goes.
    operator.stop().await;
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    for name in ["kept", "gone"] {
        clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
            )
            .await
            .expect("finalizer removed");
        clusters
            .delete(name, &DeleteParams::default())
            .await
            .expect("deleted");
    }
    wait_for("both pods collected", || async {
        get::<Pod>(&h.client, "kept-1").await.is_none()
            && get::<Pod>(&h.client, "gone-1").await.is_none()
    })
    .await;
    wait_for("the Delete cluster's claim collected", || async {
        get::<PersistentVolumeClaim>(&h.client, "gone-1")
            .await
            .is_none()
    })
    .await;
    assert!(
        get::<PersistentVolumeClaim>(&h.client, "kept-1")
            .await
            .is_some(),
        "under Retain no owner reference lets garbage collection take the data"
    );
}
