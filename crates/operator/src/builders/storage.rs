//! One PersistentVolumeClaim per instance, named like the instance: its
//! data outlives the pod, and a re-created pod finds it again.
//!
//! A claim records the uid of the cluster it was made for
//! ([`labels::CLUSTER_UID`]): that, not its name, makes it the cluster's.
//! Under `deletionPolicy: Delete` the cluster owns it, so garbage
//! collection removes it with the cluster; under `Retain` it has no owner
//! reference at all, so neither a forced deletion nor a removed finalizer
//! lets garbage collection take the data.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use tusk_api::labels;
use tusk_api::v1alpha1::DeletionPolicy;

use super::child_meta;
use crate::names::InstanceName;
use crate::validate::ValidatedCluster;

pub fn instance_pvc(cluster: &ValidatedCluster, instance: &InstanceName) -> PersistentVolumeClaim {
    let mut metadata = child_meta(cluster, instance.as_str());
    let claim_labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    claim_labels.insert(labels::INSTANCE.to_owned(), instance.to_string());
    claim_labels.insert(labels::CLUSTER_UID.to_owned(), cluster.owner.uid.clone());
    metadata.owner_references = owned_by_cluster(cluster).then(|| vec![cluster.owner.clone()]);
    PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            storage_class_name: cluster.storage_class.clone(),
            volume_mode: Some("Filesystem".to_owned()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    cluster.storage_size.clone(),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// Whether the cluster's claims carry its owner reference: only when
/// deleting the cluster is to delete its data.
pub fn owned_by_cluster(cluster: &ValidatedCluster) -> bool {
    cluster.deletion_policy == DeletionPolicy::Delete
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    #[test]
    fn a_claim_records_its_cluster_uid_and_is_owned_only_under_delete() {
        let retained = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15},
            "storage": {"size": "1Gi"}, "deletionPolicy": "Retain"
        }));
        let pvc = instance_pvc(&retained, &retained.name.instance(1));
        assert_eq!(
            pvc.metadata.labels.expect("labels")[labels::CLUSTER_UID],
            retained.owner.uid
        );
        assert_eq!(pvc.metadata.owner_references, None);
        let deleted = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15},
            "storage": {"size": "1Gi"}, "deletionPolicy": "Delete"
        }));
        let pvc = instance_pvc(&deleted, &deleted.name.instance(1));
        assert_eq!(
            pvc.metadata.owner_references,
            Some(vec![deleted.owner.clone()])
        );
    }

    #[test]
    fn a_claim_per_instance_with_the_declared_size_and_class() {
        let cluster = validated(serde_json::json!({
            "instances": 3, "postgres": {"version": 15},
            "storage": {"size": "500Gi", "storageClassName": "fast"}
        }));
        let pvc = instance_pvc(&cluster, &cluster.name.instance(2));
        assert_eq!(pvc.metadata.name.as_deref(), Some("orders-2"));
        let labels = pvc.metadata.labels.expect("labels");
        assert_eq!(labels[labels::INSTANCE], "orders-2");
        let spec = pvc.spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            spec.resources.and_then(|r| r.requests).expect("requests")["storage"].0,
            "500Gi"
        );
    }
}
