//! Escalation prevention on RBAC writes (kube-apiserver's
//! `pkg/registry/rbac`): a user may create or update a Role or
//! ClusterRole only with every permission in it (in that namespace for a
//! Role, cluster-wide for a ClusterRole) or the `escalate` verb on it, and
//! a RoleBinding or ClusterRoleBinding only with the `bind` verb on the
//! role it refers to or every permission in that role. `system:masters`
//! and the server's own writes (no user) bypass the check, and so do
//! updates that only change ownerReferences or finalizers.

use serde_json::Value;

use crate::apiserver::auth::attributes::Attributes;
use crate::apiserver::auth::authorizer::{Decision, decide, forbidden_error};
use crate::apiserver::auth::resolver::{GROUP, PolicySource, role_ref_rules, rules_for};
use crate::apiserver::auth::rules::{
    PolicyRule, ResourceTarget, Target, describe_missing, go_quoted, rules_of, uncovered,
};
use crate::apiserver::auth::user::UserInfo;
use crate::apiserver::error::ApiError;

/// The write being checked.
pub struct RbacWrite<'a> {
    /// `roles`, `clusterroles`, `rolebindings` or `clusterrolebindings`.
    pub plural: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: &'a Value,
    /// The stored object, on update.
    pub old: Option<&'a Value>,
}

/// Refuses the write when it would grant `user` permissions it does not
/// hold. Writes of other groups pass.
pub fn check(
    source: &dyn PolicySource,
    user: Option<&UserInfo>,
    group: &str,
    write: &RbacWrite<'_>,
) -> Result<(), ApiError> {
    let Some(user) = user else {
        return Ok(());
    };
    if group != GROUP || user.is_master() || only_gc_fields(write) {
        return Ok(());
    }
    match write.plural {
        "roles" | "clusterroles" => check_role(source, user, write),
        "rolebindings" | "clusterrolebindings" => check_binding(source, user, write),
        _ => Ok(()),
    }
}

/// Whether an update changes nothing but ownerReferences and finalizers
/// (what the garbage collector writes).
fn only_gc_fields(write: &RbacWrite<'_>) -> bool {
    let Some(old) = write.old else {
        return false;
    };
    let strip = |object: &Value| {
        let mut object = object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
                "generation",
            ] {
                meta.remove(field);
            }
        }
        object
    };
    strip(old) == strip(write.object)
}

fn allowed(
    source: &dyn PolicySource,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    name: &str,
    namespace: &str,
) -> bool {
    let attributes = Attributes {
        verb: verb.to_owned(),
        target: Target::Resource(ResourceTarget {
            group: GROUP.to_owned(),
            resource: resource.to_owned(),
            subresource: String::new(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        }),
    };
    decide(source, user, &attributes) == Decision::Allow
}

fn check_role(
    source: &dyn PolicySource,
    user: &UserInfo,
    write: &RbacWrite<'_>,
) -> Result<(), ApiError> {
    if allowed(
        source,
        user,
        "escalate",
        write.plural,
        write.name,
        write.namespace,
    ) {
        return Ok(());
    }
    confirm_no_escalation(source, user, write, &rules_of(write.object))
}

fn check_binding(
    source: &dyn PolicySource,
    user: &UserInfo,
    write: &RbacWrite<'_>,
) -> Result<(), ApiError> {
    let role_ref = write.object.get("roleRef").cloned().unwrap_or(Value::Null);
    let field = |name: &str| role_ref.get(name).and_then(Value::as_str).unwrap_or("");
    let role_resource = match field("kind") {
        "Role" => "roles",
        _ => "clusterroles",
    };
    if allowed(
        source,
        user,
        "bind",
        role_resource,
        field("name"),
        write.namespace,
    ) {
        return Ok(());
    }
    // A missing role is kube-apiserver's NotFound from its role lister.
    let rules = role_ref_rules(source, &role_ref, write.namespace).map_err(|_| {
        let what = role_resource.trim_end_matches('s');
        ApiError::not_found(&format!("{what}.{GROUP}"), field("name"))
    })?;
    confirm_no_escalation(source, user, write, &rules)
}

/// kube-apiserver's ConfirmNoEscalation: every rule must be covered by
/// the rules the user holds in the write's namespace.
fn confirm_no_escalation(
    source: &dyn PolicySource,
    user: &UserInfo,
    write: &RbacWrite<'_>,
    rules: &[PolicyRule],
) -> Result<(), ApiError> {
    let (owned, errors) = rules_for(source, user, write.namespace);
    let missing = uncovered(&owned, rules);
    if missing.is_empty() {
        return Ok(());
    }
    let mut text = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_quoted(&user.groups),
        describe_missing(missing)
    );
    if !errors.is_empty() {
        text.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(forbidden_error(GROUP, write.plural, write.name, &text))
}
