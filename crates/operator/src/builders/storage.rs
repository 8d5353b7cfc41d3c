//! One PersistentVolumeClaim per instance, named like the instance: its
//! data outlives the pod, and a re-created pod finds it again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use tusk_api::labels;

use super::child_meta;
use crate::names::InstanceName;
use crate::validate::ValidatedCluster;

pub fn instance_pvc(cluster: &ValidatedCluster, instance: &InstanceName) -> PersistentVolumeClaim {
    let mut metadata = child_meta(cluster, instance.as_str());
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::INSTANCE.to_owned(), instance.to_string());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

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
