//! Which rules apply to a user: ClusterRoleBindings (to ClusterRoles)
//! everywhere, and RoleBindings in the request's namespace (to a Role of
//! that namespace or a ClusterRole), whose subjects name the user, one of
//! its groups, or its ServiceAccount (kube-apiserver's rule resolver).
//!
//! It reads the store directly, or a write's transaction (the escalation
//! check runs inside one), through [`PolicySource`]. ClusterRoles'
//! `aggregationRule` is not evaluated: only a ClusterRole's own `rules`
//! count.

use std::sync::Arc;

use serde_json::Value;

use crate::apiserver::auth::rules::{PolicyRule, rules_of};
use crate::apiserver::auth::user::{UserInfo, service_account_user};
use crate::apiserver::storage::{ObjectKey, Store, Transaction};

pub const GROUP: &str = "rbac.authorization.k8s.io";
pub const ROLES: &str = "rbac.authorization.k8s.io/roles";
pub const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
pub const ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/rolebindings";
pub const CLUSTER_ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/clusterrolebindings";

/// Where the RBAC objects are read from.
pub trait PolicySource {
    fn objects(&self, resource: &str, namespace: Option<&str>) -> Vec<Arc<Value>>;
    fn object(&self, key: &ObjectKey) -> Option<Arc<Value>>;
}

/// A store that cannot be read grants nothing.
impl PolicySource for Store {
    fn objects(&self, resource: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list(resource, namespace)
            .map(|(_, items)| items)
            .unwrap_or_default()
    }

    fn object(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.get(key).ok().flatten()
    }
}

impl PolicySource for Transaction<'_> {
    fn objects(&self, resource: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list(resource, namespace)
    }

    fn object(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.get(key)
    }
}

/// Whether a binding's subject names the user. A ServiceAccount subject
/// without a namespace means the binding's own.
fn subject_matches(subject: &Value, user: &UserInfo, binding_namespace: &str) -> bool {
    let field = |name: &str| subject.get(name).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "User" => user.name == field("name"),
        "Group" => user.in_group(field("name")),
        "ServiceAccount" => {
            let namespace = match field("namespace") {
                "" => binding_namespace,
                given => given,
            };
            !namespace.is_empty() && user.name == service_account_user(namespace, field("name"))
        }
        _ => false,
    }
}

fn binds(binding: &Value, user: &UserInfo, binding_namespace: &str) -> bool {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .is_some_and(|subjects| {
            subjects
                .iter()
                .any(|s| subject_matches(s, user, binding_namespace))
        })
}

/// The rules of the role a binding refers to; the error is
/// kube-apiserver's (`role.rbac.authorization.k8s.io "x" not found`).
pub fn role_ref_rules(
    source: &dyn PolicySource,
    role_ref: &Value,
    binding_namespace: &str,
) -> Result<Vec<PolicyRule>, String> {
    let field = |name: &str| role_ref.get(name).and_then(Value::as_str).unwrap_or("");
    let name = field("name");
    let (key, what) = match field("kind") {
        "Role" => (ObjectKey::new(ROLES, binding_namespace, name), "role"),
        "ClusterRole" => (ObjectKey::new(CLUSTER_ROLES, "", name), "clusterrole"),
        other => return Err(format!("unsupported role reference kind: {other:?}")),
    };
    source
        .object(&key)
        .map(|role| rules_of(&role))
        .ok_or_else(|| format!("{what}.{GROUP} \"{name}\" not found"))
}

/// Calls `visit` with every rule that applies to `user` in `namespace`
/// (cluster-wide rules only when `namespace` is empty) until it returns
/// true. Returns the errors met (roles that do not exist), which
/// kube-apiserver reports as the reason of a denial.
pub fn visit_rules(
    source: &dyn PolicySource,
    user: &UserInfo,
    namespace: &str,
    visit: &mut dyn FnMut(&PolicyRule) -> bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut bindings: Vec<(Arc<Value>, &str)> = source
        .objects(CLUSTER_ROLE_BINDINGS, None)
        .into_iter()
        .map(|b| (b, ""))
        .collect();
    if !namespace.is_empty() {
        bindings.extend(
            source
                .objects(ROLE_BINDINGS, Some(namespace))
                .into_iter()
                .map(|b| (b, namespace)),
        );
    }
    for (binding, binding_namespace) in bindings {
        if !binds(&binding, user, binding_namespace) {
            continue;
        }
        let role_ref = binding.get("roleRef").cloned().unwrap_or(Value::Null);
        match role_ref_rules(source, &role_ref, binding_namespace) {
            Ok(rules) => {
                if rules.iter().any(&mut *visit) {
                    return errors;
                }
            }
            Err(error) => errors.push(error),
        }
    }
    errors
}

/// Every rule that applies to `user` in `namespace`, and the errors met.
pub fn rules_for(
    source: &dyn PolicySource,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<PolicyRule>, Vec<String>) {
    let mut rules = Vec::new();
    let errors = visit_rules(source, user, namespace, &mut |rule| {
        rules.push(rule.clone());
        false
    });
    (rules, errors)
}
