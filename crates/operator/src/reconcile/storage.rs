//! Storage may grow, never shrink (R26): pure checks of the declared size
//! against each volume's requested size. A shrink is refused at validation,
//! before anything is applied, even if it got past admission; a growth is
//! planned as a resize of each smaller volume.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use tusk_api::labels;

use crate::builders;

use crate::error::Error;
use crate::names::InstanceName;
use crate::validate::{ValidatedCluster, quantity_bytes};

/// The storage a volume requests, and its bytes; `None` when it says
/// nothing readable (such a volume is left alone).
fn requested(volume: &PersistentVolumeClaim) -> Option<(&Quantity, u128)> {
    let quantity = volume
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    Some((quantity, quantity_bytes(quantity)?))
}

/// Refuses a declared size below what a volume already requests.
pub fn refuse_shrink(
    valid: &ValidatedCluster,
    volumes: &[PersistentVolumeClaim],
) -> Result<(), Error> {
    for volume in volumes {
        if let Some((current, bytes)) = requested(volume)
            && valid.storage_bytes < bytes
        {
            return Err(Error::Refused(format!(
                "spec.storage.size: storage may grow but never shrink: volume {} has {}, the spec asks for {}",
                volume.name_any(),
                current.0,
                valid.storage_size.0
            )));
        }
    }
    Ok(())
}

/// A volume whose owner references change: the cluster's reference is
/// added (`deletionPolicy: Delete`) or removed (`Retain`). A claim made
/// before claims recorded their cluster's uid gains that label in the same
/// patch: once its owner reference is gone, the label is what keeps it the
/// cluster's.
#[derive(Debug, PartialEq)]
pub struct OwnerChange {
    pub volume: String,
    /// The whole list to write: others' references are kept.
    pub references: Vec<OwnerReference>,
}

/// The volumes whose owner reference does not match the deletion policy,
/// or that do not record the cluster's uid yet.
pub fn ownership(valid: &ValidatedCluster, volumes: &[PersistentVolumeClaim]) -> Vec<OwnerChange> {
    let owned = builders::owned_by_cluster(valid);
    volumes
        .iter()
        .filter_map(|volume| {
            let references = volume.owner_references();
            let has = references.iter().any(|r| r.uid == valid.owner.uid);
            let labelled = volume.labels().get(labels::CLUSTER_UID) == Some(&valid.owner.uid);
            (has != owned || !labelled).then(|| OwnerChange {
                volume: volume.name_any(),
                references: references
                    .iter()
                    .filter(|r| r.uid != valid.owner.uid)
                    .cloned()
                    .chain(owned.then(|| valid.owner.clone()))
                    .collect(),
            })
        })
        .collect()
}

/// The volumes to grow to the declared size.
pub fn resizes(valid: &ValidatedCluster, volumes: &[PersistentVolumeClaim]) -> Vec<InstanceName> {
    volumes
        .iter()
        .filter(|volume| requested(volume).is_some_and(|(_, bytes)| bytes < valid.storage_bytes))
        .map(|volume| InstanceName::recorded(&volume.name_any()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OperatorConfig;
    use crate::validate::tests::{cluster, three_instances};

    fn declared(size: &str) -> ValidatedCluster {
        let mut spec = three_instances();
        spec["storage"]["size"] = size.into();
        crate::validate::validate(&cluster(spec), &OperatorConfig::default()).expect("valid")
    }

    fn volume(name: &str, size: Option<&str>) -> PersistentVolumeClaim {
        let spec = size.map_or(
            serde_json::json!({}),
            |size| serde_json::json!({"resources": {"requests": {"storage": size}}}),
        );
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
            .expect("a volume")
    }

    #[test]
    fn storage_grows_and_never_shrinks() {
        let volumes = [
            volume("orders-1", Some("1Gi")),
            volume("orders-2", Some("2Gi")),
            volume("orders-3", None),
        ];
        // (declared size, refused, volumes to grow)
        let cases: [(&str, bool, &[&str]); 4] = [
            ("2Gi", false, &["orders-1"]),
            ("2048Mi", false, &["orders-1"]),
            ("3Gi", false, &["orders-1", "orders-2"]),
            ("1536Mi", true, &["orders-1"]),
        ];
        for (size, refused, grown) in cases {
            let valid = declared(size);
            let refusal = refuse_shrink(&valid, &volumes);
            assert_eq!(refusal.is_err(), refused, "{size}");
            if let Err(error) = refusal {
                assert!(error.to_string().contains("orders-2"), "{error}");
            }
            let planned: Vec<String> = resizes(&valid, &volumes)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(planned, grown, "{size}");
        }
    }

    #[test]
    fn owner_references_follow_the_deletion_policy_and_keep_others() {
        let mut spec = three_instances();
        let other = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                       "name": "keeper", "uid": "someone-else"});
        let mut owned = volume("orders-1", Some("1Gi"));
        let ours = serde_json::to_value(&declared("1Gi").owner).expect("owner");
        owned.metadata.owner_references =
            Some(serde_json::from_value(serde_json::json!([other, ours])).expect("refs"));
        let mut free = volume("orders-2", Some("1Gi"));
        free.metadata.owner_references =
            Some(serde_json::from_value(serde_json::json!([other])).expect("refs"));
        for volume in [&mut owned, &mut free] {
            volume.metadata.labels = Some(std::collections::BTreeMap::from([(
                labels::CLUSTER_UID.to_owned(),
                "0c1d-uid".to_owned(),
            )]));
        }
        let volumes = [owned, free];
        // (policy, volume that changes, its references afterwards)
        for (policy, changed, uids) in [
            ("Retain", "orders-1", vec!["someone-else"]),
            ("Delete", "orders-2", vec!["someone-else", "0c1d-uid"]),
        ] {
            spec["deletionPolicy"] = policy.into();
            let valid =
                crate::validate::validate(&cluster(spec.clone()), &OperatorConfig::default())
                    .expect("valid");
            let changes = ownership(&valid, &volumes);
            assert_eq!(changes.len(), 1, "{policy}: {changes:?}");
            assert_eq!(changes[0].volume, changed, "{policy}");
            let kept: Vec<&str> = changes[0]
                .references
                .iter()
                .map(|r| r.uid.as_str())
                .collect();
            assert_eq!(kept, uids, "{policy}");
        }
    }

    #[test]
    fn a_claim_from_before_the_uid_label_keeps_belonging_once_its_reference_goes() {
        let valid = declared("1Gi");
        let mut old = volume("orders-1", Some("1Gi"));
        old.metadata.owner_references = Some(vec![valid.owner.clone()]);
        assert!(crate::children::volume_belongs(&old, &valid.owner.uid));
        let changes = ownership(&valid, std::slice::from_ref(&old));
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(
            changes[0].references.is_empty(),
            "Retain: no owner reference"
        );
        // What the patch writes: the references and the uid label.
        old.metadata.owner_references = Some(changes[0].references.clone());
        old.metadata.labels = Some(std::collections::BTreeMap::from([(
            labels::CLUSTER_UID.to_owned(),
            valid.owner.uid.clone(),
        )]));
        assert!(crate::children::volume_belongs(&old, &valid.owner.uid));
        assert_eq!(ownership(&valid, &[old]), vec![]);
    }
}
