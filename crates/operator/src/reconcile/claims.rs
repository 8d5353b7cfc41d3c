//! Applying the volume claims a plan asks for: a new instance's claim is
//! created, never taken over; volumes grow by server-side apply; owner
//! references follow the deletion policy.
//!
//! A claim is created with a plain create, not an apply: when a claim of
//! that name already exists (a retained volume of a deleted cluster of the
//! same name, or someone else's), the create fails instead of making that
//! volume, with its data, the new instance's. Such a claim is reported
//! (`VolumeConflict`, in the condition and an event) and left as it is.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tusk_api::labels;

use super::storage::OwnerChange;
use crate::apply::{FIELD_MANAGER, apply as apply_one};
use crate::builders;
use crate::children::{Children, named, volume_belongs};
use crate::error::Error;
use crate::names::InstanceName;
use crate::validate::ValidatedCluster;

/// Grows each planned volume to the declared size.
pub async fn resize(
    api: &Api<PersistentVolumeClaim>,
    valid: &ValidatedCluster,
    children: &Children,
    resizes: &[InstanceName],
) -> Result<(), Error> {
    for instance in resizes {
        let live = named(&children.volumes, instance.as_str());
        apply_one(api, live, &builders::instance_pvc(valid, instance)).await?;
    }
    Ok(())
}

/// Creates the claim of a new instance unless the cluster has it already;
/// refuses one that exists and is not the cluster's.
pub async fn create(
    api: &Api<PersistentVolumeClaim>,
    valid: &ValidatedCluster,
    children: &Children,
    instance: &InstanceName,
) -> Result<(), Error> {
    let name = instance.as_str();
    if named(&children.volumes, name).is_some() {
        return Ok(());
    }
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api
        .create(&params, &builders::instance_pvc(valid, instance))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let live = api
                .get(name)
                .await
                .map_err(Error::kube(format!("read PersistentVolumeClaim {name}")))?;
            // Made for this cluster and not yet in the cache: ours.
            if volume_belongs(&live, &valid.owner.uid) {
                Ok(())
            } else {
                Err(Error::VolumeConflict(not_ours(&live, &valid.owner.uid)))
            }
        }
        Err(source) => Err(Error::Kube {
            action: format!("create PersistentVolumeClaim {name}"),
            source,
        }),
    }
}

/// Why `claim` is not the cluster's, and what to do about it.
pub fn not_ours(claim: &PersistentVolumeClaim, uid: &str) -> String {
    let name = claim.name_any();
    let made_for = claim.labels().get(labels::CLUSTER_UID);
    let why = match made_for {
        _ if claim.labels().get(labels::RETAINED).map(String::as_str) == Some("true") => format!(
            "it holds data retained from an earlier cluster{}",
            made_for.map_or_else(String::new, |uid| format!(" (uid {uid})"))
        ),
        Some(other) => format!("it was made for another cluster (uid {other})"),
        None => "it was not made by Tusk".to_owned(),
    };
    format!(
        "PersistentVolumeClaim {name} exists but was not made for this cluster (uid {uid}): {why}. \
         Tusk never adopts a volume: delete or rename the claim to let the instance start empty, \
         or keep it and give this cluster another name"
    )
}

/// Sets or removes the cluster's owner reference on its volumes, keeping
/// everyone else's references, and records the cluster's uid on them.
pub async fn set_owners(
    api: &Api<PersistentVolumeClaim>,
    valid: &ValidatedCluster,
    changes: &[OwnerChange],
) -> Result<(), Error> {
    for change in changes {
        let patch = json!({"metadata": {
            "ownerReferences": change.references,
            "labels": {labels::CLUSTER_UID: valid.owner.uid},
        }});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        api.patch(&change.volume, &params, &Patch::Merge(&patch))
            .await
            .map_err(Error::kube(format!(
                "set the owner references of PersistentVolumeClaim {}",
                change.volume
            )))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(labels: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": "orders-1", "labels": labels}}))
            .expect("a claim")
    }

    #[test]
    fn the_refusal_says_why_the_claim_is_not_the_clusters() {
        let retained = claim(json!({labels::RETAINED: "true", labels::CLUSTER_UID: "old"}));
        let message = not_ours(&retained, "new");
        assert!(
            message.contains("retained from an earlier cluster (uid old)"),
            "{message}"
        );
        assert!(message.contains("orders-1"), "{message}");
        let other = not_ours(&claim(json!({labels::CLUSTER_UID: "other"})), "new");
        assert!(other.contains("another cluster (uid other)"), "{other}");
        let foreign = not_ours(&claim(json!({})), "new");
        assert!(foreign.contains("not made by Tusk"), "{foreign}");
    }
}
