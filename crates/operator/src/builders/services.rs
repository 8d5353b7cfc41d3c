//! The cluster's Services: `-rw` reaches the primary, `-ro` the replicas,
//! `-r` any instance. They select on the role label the operator keeps on
//! the pods, so repointing `-rw` after a failover is a label change, and
//! `-rw` follows the label alone, not the pod's readiness.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tusk_api::labels;

use super::{POSTGRES_PORT, child_meta};
use crate::validate::ValidatedCluster;

/// `-rw` routes to the pod labelled primary whether or not the kubelet
/// counts it ready (`publishNotReadyAddresses`): the label is the
/// operator's word that the instance serves as the primary, given only
/// once the chosen instance reports so and taken from a failed primary the
/// moment another is chosen. Waiting for readiness as well would keep
/// writes from a new primary until the kubelet's next probe of it, up to a
/// probe period after a failover (as a standby with no primary to stream
/// from, its pod had turned unready).
pub fn rw_service(cluster: &ValidatedCluster) -> Service {
    let mut service = service(
        cluster,
        &cluster.name.rw_service(),
        Some(labels::role::PRIMARY),
    );
    if let Some(spec) = service.spec.as_mut() {
        spec.publish_not_ready_addresses = Some(true);
    }
    service
}

pub fn ro_service(cluster: &ValidatedCluster) -> Service {
    service(
        cluster,
        &cluster.name.ro_service(),
        Some(labels::role::REPLICA),
    )
}

pub fn r_service(cluster: &ValidatedCluster) -> Service {
    service(cluster, &cluster.name.r_service(), None)
}

fn service(cluster: &ValidatedCluster, name: &str, role: Option<&str>) -> Service {
    let mut selector = BTreeMap::from([(labels::CLUSTER.to_owned(), cluster.name.to_string())]);
    if let Some(role) = role {
        selector.insert(labels::ROLE.to_owned(), role.to_owned());
    }
    Service {
        metadata: child_meta(cluster, name),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some("postgres".to_owned()),
                port: i32::from(POSTGRES_PORT),
                target_port: Some(IntOrString::String("postgres".to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    #[test]
    fn rw_selects_the_primary_ro_the_replicas_r_everyone() {
        let cluster = validated(
            serde_json::json!({"instances": 3, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        let selector = |s: Service| s.spec.and_then(|s| s.selector).expect("selector");
        let published = |s: &Service| s.spec.as_ref().and_then(|s| s.publish_not_ready_addresses);
        assert_eq!(published(&rw_service(&cluster)), Some(true));
        assert_eq!(published(&ro_service(&cluster)), None);
        assert_eq!(published(&r_service(&cluster)), None);
        let rw = selector(rw_service(&cluster));
        assert_eq!(rw.get(labels::ROLE).map(String::as_str), Some("primary"));
        assert_eq!(rw.get(labels::CLUSTER).map(String::as_str), Some("orders"));
        let ro = selector(ro_service(&cluster));
        assert_eq!(ro.get(labels::ROLE).map(String::as_str), Some("replica"));
        let r = selector(r_service(&cluster));
        assert!(!r.contains_key(labels::ROLE));
        assert_eq!(
            rw_service(&cluster).metadata.name.as_deref(),
            Some("orders-rw")
        );
    }
}
