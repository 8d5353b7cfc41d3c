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
            for volume in &children.volumes {
                retain_volume(&api, &volume.name_any()).await?;
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

/// Detaches a volume from its cluster and marks it as retained.
pub async fn retain_volume(api: &Api<PersistentVolumeClaim>, name: &str) -> Result<(), Error> {
    let patch = json!({
        "metadata": {
            "ownerReferences": null,
            "labels": {labels::RETAINED: "true"},
        }
    });
    match api
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Kube {
            action: format!("retain volume {name}"),
            source,
        }),
    }
}
