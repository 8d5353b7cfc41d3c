//! The operator's own permissions, least privilege (R17): exactly what the
//! controller calls, plus what the Roles it creates for instance managers
//! grant (Kubernetes refuses to let a subject create a Role with
//! permissions it does not hold itself, unless it has `escalate`, which is
//! far broader). Every rule carries the reason it exists; docs/install.md
//! lists them and `deploy/install.yaml` prints them as comments.
//!
//! Server-side apply of an object that does not exist yet is authorised as
//! `create` as well as `patch`, so every kind the operator applies has both.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use super::{NAME, NAMESPACE, meta};
use crate::leader::LEASE_NAME;

/// A permission and why the operator needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub reason: &'static str,
    pub rule: PolicyRule,
}

fn rule(
    reason: &'static str,
    groups: &[&str],
    resources: &[&str],
    verbs: &[&str],
    names: &[&str],
) -> Rule {
    let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    Rule {
        reason,
        rule: PolicyRule {
            api_groups: Some(owned(groups)),
            resources: Some(owned(resources)),
            verbs: owned(verbs),
            resource_names: (!names.is_empty()).then(|| owned(names)),
            ..PolicyRule::default()
        },
    }
}

/// The ClusterRole's rules: PostgresClusters and their children in every
/// namespace the operator watches.
pub fn operator_rules() -> Vec<Rule> {
    let mut rules = cluster_and_data_rules();
    rules.extend(companion_rules());
    rules
}

/// Clusters, their status, and the objects that hold or run the data:
/// pods and volumes.
fn cluster_and_data_rules() -> Vec<Rule> {
    vec![
        rule(
            "Clusters are watched to be reconciled (list, watch); the finalizer is added and removed, and handled request annotations cleared, with patches (patch); instance managers' Roles grant get on their cluster.",
            &[tusk_api::GROUP],
            &["postgresclusters"],
            &["get", "list", "watch", "patch"],
            &[],
        ),
        rule(
            "PostgresBackups are watched (list, watch) to assign them to an instance one at a time, and created (create) by spec.backup.schedule; the operator never deletes them.",
            &[tusk_api::GROUP],
            &["postgresbackups"],
            &["list", "watch", "create"],
            &[],
        ),
        rule(
            "A PostgresBackup's status (phase, backup id, LSNs, size, error) is patched as the instance taking it reports.",
            &[tusk_api::GROUP],
            &["postgresbackups/status"],
            &["patch"],
            &[],
        ),
        rule(
            "Status (phase, conditions, targetPrimary, instances) is server-side applied to the status subresource.",
            &[tusk_api::GROUP],
            &["postgresclusters/status"],
            &["patch"],
            &[],
        ),
        rule(
            "Instance pods are cached (list, watch), created with server-side apply (create, patch), labelled primary or replica (patch) and removed when the cluster shrinks (delete); instance managers' Roles grant get, to look up the primary's IP. A restore rehearsal's pod is read by name (get), created (create) and removed once its outcome is recorded (delete).",
            &[""],
            &["pods"],
            &["get", "list", "watch", "create", "patch", "delete"],
            &[],
        ),
        rule(
            "Each instance's volume is cached (list, watch) and created (create); when a claim of that name exists, it is read (get) to tell whether it was made for the cluster, since a volume is never adopted. Volumes grow by server-side apply, gain or lose the cluster's owner reference with the deletion policy and are marked when retained (patch), and are deleted with their instance under deletionPolicy Delete. A restore rehearsal's scratch volume is read by name (get), created (create) and deleted with its pod (delete).",
            &[""],
            &["persistentvolumeclaims"],
            &["get", "list", "watch", "create", "patch", "delete"],
            &[],
        ),
    ]
}

/// What each cluster's instances need around them: credentials,
/// Services, identity and RBAC, budgets, the primary lease, events.
fn companion_rules() -> Vec<Rule> {
    vec![
        rule(
            "Credential and certificate Secrets are cached to know which exist (list, watch) and created once with generated passwords and certificates (create); a server or replication certificate is issued again before it expires (patch). They are never read one by one (get), replaced (update) or deleted.",
            &[""],
            &["secrets"],
            &["list", "watch", "create", "patch"],
            &[],
        ),
        rule(
            "The -rw, -ro and -r Services are cached and server-side applied.",
            &[""],
            &["services"],
            &["list", "watch", "create", "patch"],
            &[],
        ),
        rule(
            "Each cluster's instance managers run under their own ServiceAccount, cached and server-side applied.",
            &[""],
            &["serviceaccounts"],
            &["list", "watch", "create", "patch"],
            &[],
        ),
        rule(
            "The instance managers' Role and RoleBinding are cached and server-side applied; binding to a Role needs no `bind` verb because the operator holds every permission the Role grants.",
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
            &["list", "watch", "create", "patch"],
            &[],
        ),
        rule(
            "PodDisruptionBudgets for the primary and the replicas are cached, server-side applied, and the replicas' budget deleted when one instance is left.",
            &["policy"],
            &["poddisruptionbudgets"],
            &["list", "watch", "create", "patch", "delete"],
            &[],
        ),
        rule(
            "A cluster's NetworkPolicy (spec.networkPolicy) is cached, server-side applied, and deleted when the declaration is removed.",
            &["networking.k8s.io"],
            &["networkpolicies"],
            &["list", "watch", "create", "patch", "delete"],
            &[],
        ),
        rule(
            "Primary leases (<cluster>-primary, labelled with their cluster) are watched (list, watch: by that label) so that a primary whose renewals stop is noticed within a second and its last renewal dates the failure, and read (get) to tell whether a failed primary may still be acting as one before it is replaced; instance managers' Roles grant create, get and update, for the primary's manager to hold the lease, and list and watch by name, for standbys to stream only from a primary whose lease is renewed.",
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "list", "watch", "create", "update"],
            &[],
        ),
        rule(
            "The admission webhook's authority is injected into the caBundle of its ValidatingWebhookConfiguration (get, update): that configuration only.",
            &["admissionregistration.k8s.io"],
            &["validatingwebhookconfigurations"],
            &["get", "update"],
            &[crate::webhook::CONFIGURATION],
        ),
        rule(
            "Events report phase changes and failures (events.k8s.io, created then patched when repeated); core events only because instance managers' Roles grant them.",
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch"],
            &[],
        ),
    ]
}

/// The leader-election rules, in the operator's own namespace only.
pub fn leader_rules() -> Vec<Rule> {
    vec![
        rule(
            "The first replica creates the leader Lease (a create cannot be limited to a name).",
            &["coordination.k8s.io"],
            &["leases"],
            &["create"],
            &[],
        ),
        rule(
            "Replicas read the leader Lease and renew or take it over with patches: that Lease only.",
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "patch"],
            &[LEASE_NAME],
        ),
        rule(
            "Every replica reads the admission webhook's certificate (get) and, when it is due, renews it (update): that Secret only, in the operator's namespace. The first one is created under the ClusterRole's create on Secrets.",
            &[""],
            &["secrets"],
            &["get", "update"],
            &[crate::webhook::certificate::SECRET],
        ),
    ]
}

fn rules(rules: Vec<Rule>) -> Option<Vec<PolicyRule>> {
    Some(rules.into_iter().map(|r| r.rule).collect())
}

fn subjects() -> Option<Vec<Subject>> {
    Some(vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: NAME.to_owned(),
        namespace: Some(NAMESPACE.to_owned()),
        ..Subject::default()
    }])
}

fn role_ref(kind: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".to_owned(),
        kind: kind.to_owned(),
        name: NAME.to_owned(),
    }
}

pub fn service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: meta(NAME, Some(NAMESPACE)),
        ..ServiceAccount::default()
    }
}

pub fn cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: meta(NAME, None),
        rules: rules(operator_rules()),
        ..ClusterRole::default()
    }
}

pub fn cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: role_ref("ClusterRole"),
        subjects: subjects(),
    }
}

pub fn leader_role() -> Role {
    Role {
        metadata: meta(NAME, Some(NAMESPACE)),
        rules: rules(leader_rules()),
    }
}

pub fn leader_role_binding() -> RoleBinding {
    RoleBinding {
        metadata: meta(NAME, Some(NAMESPACE)),
        role_ref: role_ref("Role"),
        subjects: subjects(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{instance_role, validated};

    /// Whether `granted` allows `verb` on `group`/`resource` (named `name`),
    /// as RBAC decides it (no wildcards: the operator's rules have none).
    fn allows(
        granted: &[PolicyRule],
        group: &str,
        resource: &str,
        verb: &str,
        name: Option<&str>,
    ) -> bool {
        granted.iter().any(|rule| {
            let has = |list: &Option<Vec<String>>, item: &str| {
                list.as_ref().is_some_and(|l| l.iter().any(|x| x == item))
            };
            has(&rule.api_groups, group)
                && has(&rule.resources, resource)
                && rule.verbs.iter().any(|v| v == verb)
                && match (&rule.resource_names, name) {
                    (None, _) => true,
                    (Some(names), Some(name)) => names.iter().any(|n| n == name),
                    (Some(_), None) => false,
                }
        })
    }

    fn granted() -> Vec<PolicyRule> {
        cluster_role().rules.unwrap_or_default()
    }

    #[test]
    fn the_operator_holds_every_permission_it_grants_to_instance_managers() {
        let cluster = validated(
            serde_json::json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        let granted = granted();
        for rule in instance_role(&cluster).rules.unwrap_or_default() {
            let names = rule.resource_names.clone().unwrap_or_default();
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    for verb in &rule.verbs {
                        let name = names.first().map(String::as_str);
                        assert!(
                            allows(&granted, group, resource, verb, name),
                            "instance managers get {verb} on {group}/{resource}, which the operator lacks: creating their Role would be refused as an escalation"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_applied_kind_may_be_created_and_patched() {
        // Server-side apply creates what is missing, and an absent object
        // is authorised as `create`.
        let granted = granted();
        for (group, resource) in [
            ("", "pods"),
            ("", "persistentvolumeclaims"),
            ("", "services"),
            ("", "serviceaccounts"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "rolebindings"),
            ("policy", "poddisruptionbudgets"),
        ] {
            for verb in ["create", "patch", "list", "watch"] {
                assert!(
                    allows(&granted, group, resource, verb, None),
                    "{verb} {resource}"
                );
            }
        }
    }

    #[test]
    fn secrets_are_never_read_replaced_or_deleted_through_the_api() {
        let granted = granted();
        for verb in ["get", "update", "delete", "deletecollection"] {
            assert!(
                !allows(&granted, "", "secrets", verb, None),
                "{verb} secrets"
            );
        }
    }

    #[test]
    fn no_rule_uses_a_wildcard_or_lacks_a_reason() {
        for rule in operator_rules().into_iter().chain(leader_rules()) {
            assert!(!rule.reason.is_empty());
            let all = rule
                .rule
                .verbs
                .iter()
                .chain(rule.rule.resources.iter().flatten())
                .chain(rule.rule.api_groups.iter().flatten());
            for item in all {
                assert_ne!(item, "*", "{}", rule.reason);
            }
        }
    }

    #[test]
    fn leases_are_never_deleted_or_patched_but_the_leader_lease() {
        for verb in ["delete", "deletecollection", "patch"] {
            assert!(
                !allows(&granted(), "coordination.k8s.io", "leases", verb, None),
                "{verb} leases"
            );
        }
        assert!(allows(
            &granted(),
            "coordination.k8s.io",
            "leases",
            "get",
            None
        ));
    }

    #[test]
    fn the_leader_lease_is_the_only_lease_the_leader_role_patches() {
        let role = leader_role().rules.unwrap_or_default();
        assert!(allows(
            &role,
            "coordination.k8s.io",
            "leases",
            "patch",
            Some(LEASE_NAME)
        ));
        assert!(!allows(
            &role,
            "coordination.k8s.io",
            "leases",
            "patch",
            Some("another")
        ));
        assert!(allows(
            &role,
            "coordination.k8s.io",
            "leases",
            "create",
            None
        ));
    }
}
