//! Least privilege for the instance managers (R17): each cluster's pods run
//! under their own ServiceAccount, allowed to read their own cluster object,
//! to look up a pod by name (the target primary's IP, which replication
//! follows), to hold the cluster's primary lease, to report events and
//! to list the declared roles' password Secrets by name, nothing else.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use super::child_meta;
use crate::validate::ValidatedCluster;

pub fn instance_service_account(cluster: &ValidatedCluster) -> ServiceAccount {
    let mut metadata = child_meta(cluster, &cluster.name.instance_account());
    if !cluster.service_account_annotations.is_empty() {
        metadata.annotations = Some(cluster.service_account_annotations.clone());
    }
    ServiceAccount {
        metadata,
        ..ServiceAccount::default()
    }
}

pub fn instance_role(cluster: &ValidatedCluster) -> Role {
    Role {
        metadata: child_meta(cluster, &cluster.name.instance_account()),
        rules: Some(
            [
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
            ]
            .into_iter()
            .chain(role_password_secrets(cluster))
            .collect(),
        ),
    }
}

/// The declared roles' password Secrets (`spec.roles`), which the primary's
/// manager reads: a `list` narrowed to one name by a field selector (which
/// the API server authorises by that name), those names only. Not `get`:
/// the operator never gets a Secret, and grants only what it holds. No
/// rule at all when no role has one: a rule without names would grant
/// every Secret.
fn role_password_secrets(cluster: &ValidatedCluster) -> Option<PolicyRule> {
    let mut names: Vec<String> = cluster
        .roles
        .iter()
        .filter_map(|r| r.password_secret_name(cluster.name.as_str()))
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return None;
    }
    Some(PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".to_owned()]),
        resource_names: Some(names),
        verbs: vec!["list".to_owned()],
        ..PolicyRule::default()
    })
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
    fn the_service_account_carries_the_declared_workload_identity() {
        let plain = validated(
            serde_json::json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        assert_eq!(instance_service_account(&plain).metadata.annotations, None);
        let cluster = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "backups@p.iam.gserviceaccount.com"}}
        }));
        let account = instance_service_account(&cluster);
        assert_eq!(account.metadata.name.as_deref(), Some("orders-instance"));
        assert_eq!(
            account
                .metadata
                .annotations
                .and_then(|a| a.get("iam.gke.io/gcp-service-account").cloned())
                .as_deref(),
            Some("backups@p.iam.gserviceaccount.com")
        );
    }

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

    #[test]
    fn instance_managers_may_get_only_the_declared_roles_password_secrets() {
        let cluster = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "roles": [
                {"name": "web", "login": true},
                {"name": "batch", "login": true, "passwordSecret": {"name": "batch-pw"}},
                {"name": "readers"},
                {"name": "old", "login": true, "ensure": "absent"}
            ]
        }));
        let rules = instance_role(&cluster).rules.expect("rules");
        let secrets: Vec<&PolicyRule> = rules
            .iter()
            .filter(|r| r.resources.iter().flatten().any(|r| r == "secrets"))
            .collect();
        assert_eq!(secrets.len(), 1);
        assert_eq!(secrets[0].verbs, ["list"]);
        assert_eq!(
            secrets[0].resource_names,
            Some(vec!["batch-pw".to_owned(), "orders-role-web".to_owned()])
        );
        // Roles without a password: no rule, never one without names.
        let cluster = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "roles": [{"name": "readers"}]
        }));
        let rules = instance_role(&cluster).rules.expect("rules");
        assert!(
            !rules
                .iter()
                .any(|r| r.resources.iter().flatten().any(|r| r == "secrets"))
        );
    }
}
