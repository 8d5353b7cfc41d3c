//! The cluster's NetworkPolicy (`spec.networkPolicy`): PostgreSQL admits
//! the cluster's own instances (replication) and the declared clients;
//! pgBackRest's TLS server the instances alone (a standby's backup);
//! the instance API stays open to all (probes, the operator, `kubectl tusk
//! plan` through the API server; its `/status` answers only the cluster's
//! authority). Made only when declared: NetworkPolicies add up, so a
//! policy of the operator's admitting everyone would undo a narrower one
//! of the owner's.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tusk_api::contract::{BACKUP_SERVER_PORT, HTTP_PORT, POSTGRES_PORT};
use tusk_api::labels;

use super::child_meta;
use crate::validate::ValidatedCluster;

/// The cluster's instance pods (their cluster label, and an instance
/// label, which the restore rehearsal's pod lacks).
fn instances(cluster: &ValidatedCluster) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(
            labels::CLUSTER.to_owned(),
            cluster.name.to_string(),
        )])),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: labels::INSTANCE.to_owned(),
            operator: "Exists".to_owned(),
            values: None,
        }]),
    }
}

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".to_owned()),
        end_port: None,
    }
}

/// The NetworkPolicy `spec.networkPolicy` declares, named as the cluster;
/// `None` when it declares none.
pub fn network_policy(cluster: &ValidatedCluster) -> Option<NetworkPolicy> {
    let declared = cluster.network_policy.as_ref()?;
    let mut postgres_from = vec![NetworkPolicyPeer {
        pod_selector: Some(instances(cluster)),
        ..NetworkPolicyPeer::default()
    }];
    postgres_from.extend(declared.clients.iter().cloned());
    Some(NetworkPolicy {
        metadata: child_meta(cluster, cluster.name.as_str()),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(instances(cluster)),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(POSTGRES_PORT)]),
                    from: Some(postgres_from),
                },
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(BACKUP_SERVER_PORT)]),
                    from: Some(vec![NetworkPolicyPeer {
                        pod_selector: Some(instances(cluster)),
                        ..NetworkPolicyPeer::default()
                    }]),
                },
                // No `from`: every source.
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(HTTP_PORT)]),
                    from: None,
                },
            ]),
            egress: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;
    use serde_json::json;

    #[test]
    fn postgres_admits_the_instances_and_the_declared_clients_only() {
        let none = validated(
            json!({"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        assert!(network_policy(&none).is_none(), "made only when declared");

        let cluster = validated(json!({
            "instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "networkPolicy": {"clients": [
                {"podSelector": {"matchLabels": {"app": "shop"}}},
                {"namespaceSelector": {"matchLabels": {"team": "reports"}}}
            ]}
        }));
        let policy = network_policy(&cluster).expect("declared");
        assert_eq!(
            serde_json::to_value(policy.spec.expect("spec")).expect("json"),
            json!({
                "podSelector": {"matchLabels": {"tusk.dev/cluster": "orders"},
                    "matchExpressions": [{"key": "tusk.dev/instance", "operator": "Exists"}]},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {"ports": [{"port": 5432, "protocol": "TCP"}], "from": [
                        {"podSelector": {"matchLabels": {"tusk.dev/cluster": "orders"},
                            "matchExpressions": [{"key": "tusk.dev/instance", "operator": "Exists"}]}},
                        {"podSelector": {"matchLabels": {"app": "shop"}}},
                        {"namespaceSelector": {"matchLabels": {"team": "reports"}}}
                    ]},
                    {"ports": [{"port": 8432, "protocol": "TCP"}], "from": [
                        {"podSelector": {"matchLabels": {"tusk.dev/cluster": "orders"},
                            "matchExpressions": [{"key": "tusk.dev/instance", "operator": "Exists"}]}}
                    ]},
                    {"ports": [{"port": 8000, "protocol": "TCP"}]}
                ]
            })
        );

        // No client: the instances alone, never an empty `from` (which
        // would admit everyone).
        let closed = validated(json!({
            "instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "networkPolicy": {}
        }));
        let spec = network_policy(&closed)
            .and_then(|p| p.spec)
            .expect("declared");
        let rules = spec.ingress.expect("rules");
        assert_eq!(rules[0].from.as_ref().map(Vec::len), Some(1));
    }
}
