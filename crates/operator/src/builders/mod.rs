//! Pure builders: the validated cluster in, the Kubernetes objects it should
//! have out. No I/O here; the apply step sends these with server-side apply
//! under one field manager, so every field a builder sets is a field the
//! operator owns (R14).

pub mod certificates;
pub(crate) mod container;
mod disruption;
mod network_policy;
mod pod;
mod rbac;
mod rehearsal;
mod role_secrets;
mod secrets;
mod services;
mod storage;
mod template;
mod upgrade;

pub use disruption::{primary_pdb, replicas_pdb};
pub use network_policy::network_policy;
pub use pod::{
    CONTROLLER_DIR, InstanceEnv, PGDATA, POSTGRES_PORT, SECRETS_DIR, instance_pod, pod_fingerprint,
};
pub use rbac::{instance_role, instance_role_binding, instance_service_account};
pub use rehearsal::{rehearsal_pod, rehearsal_pvc};
pub use role_secrets::{generated_roles, role_secret};
pub use secrets::{Credential, credentials_secret};
pub use services::{r_service, ro_service, rw_service};
pub use storage::{instance_pvc, owned_by_cluster};
pub use template::{Fingerprint, OPERATOR_VERSION};
pub use upgrade::{upgrade_check_pod, upgrade_check_pvc, upgrade_pod};

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tusk_api::labels;

use crate::validate::ValidatedCluster;

/// Labels every child carries: which cluster, and who manages it.
pub fn cluster_labels(cluster: &ValidatedCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::CLUSTER.to_owned(), cluster.name.to_string()),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_VALUE.to_owned(),
        ),
    ])
}

/// Metadata of a child named `name`, owned by the cluster.
fn child_meta(cluster: &ValidatedCluster, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(cluster.namespace.clone()),
        labels: Some(cluster_labels(cluster)),
        owner_references: Some(vec![cluster.owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// The claims a pod's volumes name, in order.
#[cfg(test)]
pub(crate) fn claim_names(spec: &k8s_openapi::api::core::v1::PodSpec) -> Vec<&str> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect()
}

#[cfg(test)]
pub(crate) fn validated(spec: serde_json::Value) -> ValidatedCluster {
    crate::validate::validate(
        &crate::validate::tests::cluster(spec),
        &crate::config::OperatorConfig::default(),
    )
    .expect("valid cluster")
}
