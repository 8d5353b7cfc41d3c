//! The cluster's Services: `-rw` reaches the primary, `-ro` the replicas,
//! `-r` any instance. They select on the role label the operator keeps on
//! the pods, so repointing `-rw` after a failover is a label change, and
//! `-rw` follows the label alone, not the pod's readiness. Each may be
//! declared a `NodePort` or `LoadBalancer`, with annotations, labels and
//! load balancer source ranges (`spec.services`); the selector, port and
//! name stay the operator's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tusk_api::labels;
use tusk_api::v1alpha1::ServiceTemplate;

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
        cluster.services.rw.as_ref(),
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
        cluster.services.ro.as_ref(),
    )
}

pub fn r_service(cluster: &ValidatedCluster) -> Service {
    service(
        cluster,
        &cluster.name.r_service(),
        None,
        cluster.services.r.as_ref(),
    )
}

fn service(
    cluster: &ValidatedCluster,
    name: &str,
    role: Option<&str>,
    template: Option<&ServiceTemplate>,
) -> Service {
    let mut selector = BTreeMap::from([(labels::CLUSTER.to_owned(), cluster.name.to_string())]);
    if let Some(role) = role {
        selector.insert(labels::ROLE.to_owned(), role.to_owned());
    }
    let template = template.cloned().unwrap_or_default();
    let mut metadata = child_meta(cluster, name);
    if !template.annotations.is_empty() {
        metadata.annotations = Some(template.annotations);
    }
    // The operator's labels win over declared ones of the same key (the
    // CRD refuses keys under tusk.dev/ anyway).
    let mut all_labels = template.labels;
    all_labels.extend(metadata.labels.take().unwrap_or_default());
    metadata.labels = Some(all_labels);
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some(template.type_.as_str().to_owned()),
            load_balancer_source_ranges: (!template.load_balancer_source_ranges.is_empty())
                .then_some(template.load_balancer_source_ranges),
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

    #[test]
    fn a_declared_load_balancer_keeps_the_operators_selector_and_labels() {
        let cluster = validated(serde_json::json!({
            "instances": 3, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "services": {"rw": {
                "type": "LoadBalancer",
                "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
                "labels": {"team": "orders", "tusk.dev/cluster": "someone-else"},
                "loadBalancerSourceRanges": ["10.0.0.0/8"]}}
        }));
        let rw = rw_service(&cluster);
        let spec = rw.spec.clone().expect("a spec");
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(
            spec.load_balancer_source_ranges,
            Some(vec!["10.0.0.0/8".to_owned()])
        );
        assert_eq!(
            spec.selector.and_then(|s| s.get(labels::ROLE).cloned()),
            Some("primary".to_owned())
        );
        let meta = rw.metadata;
        assert_eq!(
            meta.annotations.and_then(|a| a
                .get("service.beta.kubernetes.io/aws-load-balancer-internal")
                .cloned()),
            Some("true".to_owned())
        );
        let service_labels = meta.labels.expect("labels");
        assert_eq!(
            service_labels.get("team").map(String::as_str),
            Some("orders")
        );
        assert_eq!(
            service_labels.get(labels::CLUSTER).map(String::as_str),
            Some("orders"),
            "the operator's label wins"
        );
        // The other Services stay as they were.
        let ro = ro_service(&cluster);
        assert_eq!(ro.spec.and_then(|s| s.type_).as_deref(), Some("ClusterIP"));
        assert_eq!(ro.metadata.annotations, None);
    }
}
