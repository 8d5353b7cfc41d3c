//! Finalizer cleanup (R13, R15, R16): what happens to a deleted cluster's
//! volumes. `Retain` detaches them from the cluster (no owner reference, so
//! garbage collection keeps them) and labels them as retained; `Delete`
//! leaves them to garbage collection with the cluster's other children.
//!
//! Cleanup is safe to repeat. When it cannot finish, the error is reported
//! in status and events and retried with back-off; the annotation
//! `tusk.dev/force-delete: "true"` lets the deletion finish anyway.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use tusk_api::labels;
use tusk_api::v1alpha1::{DeletionPolicy, PostgresCluster};

use crate::apply::FIELD_MANAGER;
use crate::children::Children;
use crate::context::Context;
use crate::error::Error;
use crate::report;
use crate::status::StatusInput;

pub async fn run(cluster: &PostgresCluster, ctx: &Context) -> Result<Action, Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    ctx.rollout_slots
        .release(&crate::freshness::cluster_key(cluster));
    let outcome = async {
        if cluster.spec.deletion_policy == DeletionPolicy::Retain {
            let children = Children::fetch(&ctx.stores, cluster).await?;
            let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
            let uid = cluster.uid().unwrap_or_default();
            for volume in &children.volumes {
                retain_volume(&api, volume, &uid).await?;
            }
        }
        Ok::<(), Error>(())
    }
    .await;
    match outcome {
        Ok(()) => {
            ctx.freshness
                .forget(&crate::freshness::cluster_key(cluster));
            Ok(Action::await_change())
        }
        Err(error) if forced(cluster) => {
            tracing::warn!(%error, "cleanup failed; finishing the deletion as {} asks", labels::FORCE_DELETE);
            Ok(Action::await_change())
        }
        Err(error) => {
            // The status says why the deletion waits; a failure to write it
            // must not hide the original error.
            let _ = report_waiting(cluster, ctx, &error).await;
            Err(error)
        }
    }
}

/// Writes why the deletion waits, keeping the observed instances.
async fn report_waiting(
    cluster: &PostgresCluster,
    ctx: &Context,
    error: &Error,
) -> Result<(), Error> {
    let children = Children::fetch(&ctx.stores, cluster)
        .await
        .unwrap_or_default();
    let reports = BTreeMap::new();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let input = StatusInput::unplanned(
        cluster,
        &children.pods,
        children.volume_count(),
        &reports,
        now,
    );
    report::write(cluster, ctx, &input, Some(error)).await?;
    Ok(())
}

fn forced(cluster: &PostgresCluster) -> bool {
    cluster
        .annotations()
        .get(labels::FORCE_DELETE)
        .is_some_and(|v| v == "true")
}

/// Detaches `volume` from the cluster with `cluster_uid` and marks it as
/// retained. Only the cluster's owner reference is removed: a JSON patch
/// tests that the reference at that index is still the cluster's, so
/// another owner's (added by hand, or by a backup tool) stays, and a list
/// changed meanwhile fails the patch (retried on the next pass) instead of
/// removing the wrong one.
pub async fn retain_volume(
    api: &Api<PersistentVolumeClaim>,
    volume: &PersistentVolumeClaim,
    cluster_uid: &str,
) -> Result<(), Error> {
    let name = volume.name_any();
    let patch = json_patch::Patch(retain_operations(volume, cluster_uid));
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api.patch(&name, &params, &Patch::<()>::Json(patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Kube {
            action: format!("retain volume {name}"),
            source,
        }),
    }
}

/// The JSON patch operations that retain `volume`: the retained label, and
/// the removal of the owner references naming `cluster_uid` (from the last,
/// so the indices stay right), each after a test that it is there.
fn retain_operations(
    volume: &PersistentVolumeClaim,
    cluster_uid: &str,
) -> Vec<json_patch::PatchOperation> {
    let escaped = labels::RETAINED.replace('~', "~0").replace('/', "~1");
    let mut operations = vec![serde_json::json!(
        {"op": "add", "path": format!("/metadata/labels/{escaped}"), "value": "true"}
    )];
    if volume.labels().is_empty() {
        operations.insert(
            0,
            serde_json::json!({"op": "add", "path": "/metadata/labels", "value": {}}),
        );
    }
    let owners = volume.owner_references();
    for (index, owner) in owners.iter().enumerate().rev() {
        if owner.uid == cluster_uid {
            let path = format!("/metadata/ownerReferences/{index}/uid");
            operations.push(json!({"op": "test", "path": path, "value": cluster_uid}));
            operations.push(
                json!({"op": "remove", "path": format!("/metadata/ownerReferences/{index}")}),
            );
        }
    }
    operations
        .into_iter()
        .filter_map(|op| serde_json::from_value(op).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the cluster's reference goes, each removal tested first.
    #[test]
    fn retaining_removes_the_clusters_owner_reference_alone() {
        let volume: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {
            "name": "db-1", "labels": {"tusk.dev/cluster": "db"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "holder", "uid": "other"},
                {"apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                 "name": "db", "uid": "u1"}]}}))
        .expect("a claim");
        let mut document = serde_json::to_value(&volume).expect("json");
        json_patch::patch(&mut document, &retain_operations(&volume, "u1")).expect("applies");
        assert_eq!(
            document["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "holder", "uid": "other"}])
        );
        assert_eq!(document["metadata"]["labels"][labels::RETAINED], "true");
    }
}
