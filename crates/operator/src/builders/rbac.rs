//! Least privilege for the instance managers (R17): each cluster's pods run
//! under their own ServiceAccount, allowed to read their own cluster object,
//! to look up a pod by name (the target primary's IP, which replication
//! follows), to hold the cluster's primary lease and to report events,
//! nothing else.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use super::child_meta;
use crate::validate::ValidatedCluster;

pub fn instance_service_account(cluster: &ValidatedCluster) -> ServiceAccount {
    ServiceAccount {
        metadata: child_meta(cluster, &cluster.name.instance_account()),
        ..ServiceAccount::default()
    }
}

pub fn instance_role(cluster: &ValidatedCluster) -> Role {
    Role {
        metadata: child_meta(cluster, &cluster.name.instance_account()),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec![tusk_api::GROUP.to_owned()]),
                resources: Some(vec!["postgresclusters".to_owned()]),
                resource_names: Some(vec![cluster.name.to_string()]),
                verbs: vec!["get".to_owned(), "list".to_owned(), "watch".to_owned()],
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["pods".to_owned()]),
                verbs: vec!["get".to_owned()],
                ..PolicyRule::default()
            },
            // The primary lease: created by the first primary's manager (a
            // create cannot be limited to a name), then read, renewed, taken
            // over and released by updates naming the version they replace,
            // and watched by the standbys, which stream only from a holder
            // that renews it (see the instance manager's lease view).
            PolicyRule {
                api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
                resources: Some(vec!["leases".to_owned()]),
                verbs: vec!["create".to_owned()],
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec!["coordination.k8s.io".to_owned()]),
                resources: Some(vec!["leases".to_owned()]),
                resource_names: Some(vec![tusk_api::primacy::lease_name(
                    &cluster.name.to_string(),
                )]),
                verbs: ["get", "list", "watch", "update"]
                    .map(str::to_owned)
                    .to_vec(),
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec![String::new(), "events.k8s.io".to_owned()]),
                resources: Some(vec!["events".to_owned()]),
                verbs: vec!["create".to_owned(), "patch".to_owned()],
                ..PolicyRule::default()
            },
        ]),
    }
}

pub fn instance_role_binding(cluster: &ValidatedCluster) -> RoleBinding {
    let name = cluster.name.instance_account();
    RoleBinding {
        metadata: child_meta(cluster, &name),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name,
            namespace: Some(cluster.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    #[test]
    fn instance_managers_may_only_read_their_cluster_get_pods_hold_their_lease_and_report_events() {
        let cluster = validated(
            serde_json::json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        let role = instance_role(&cluster);
        let rules = role.rules.expect("rules");
        assert_eq!(rules.len(), 5);
        let lease = &rules[3];
        assert_eq!(lease.resources, Some(vec!["leases".to_owned()]));
        assert_eq!(
            lease.verbs,
            ["get", "list", "watch", "update"],
            "no delete, no patch; watched by standbys"
        );
        assert_eq!(
            lease.resource_names,
            Some(vec!["orders-primary".to_owned()]),
            "its own cluster's lease only"
        );
        assert_eq!(rules[1].resources, Some(vec!["pods".to_owned()]));
        assert_eq!(rules[1].verbs, ["get"], "a pod lookup by name only");
        assert_eq!(rules[0].resource_names, Some(vec!["orders".to_owned()]));
        for rule in &rules {
            for verb in &rule.verbs {
                assert!(
                    ["get", "list", "watch", "create", "patch", "update"].contains(&verb.as_str())
                );
            }
            let resources = rule.resources.clone().unwrap_or_default();
            assert!(!resources.iter().any(|r| r == "secrets" || r == "*"));
        }
        let binding = instance_role_binding(&cluster);
        assert_eq!(binding.role_ref.name, "orders-instance");
        let subject = &binding.subjects.expect("subjects")[0];
        assert_eq!(
            subject.name,
            instance_service_account(&cluster)
                .metadata
                .name
                .expect("named")
        );
        assert_eq!(subject.namespace.as_deref(), Some("shop"));
    }
}
