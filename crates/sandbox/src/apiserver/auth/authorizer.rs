//! The authorizer: `system:masters` may do anything (kube-apiserver's
//! privileged-group authorizer), everyone else what RBAC allows. A
//! refusal is kube-apiserver's 403, with its message and details.

use crate::apiserver::auth::attributes::Attributes;
use crate::apiserver::auth::resolver::{PolicySource, visit_rules};
use crate::apiserver::auth::rules::{Target, allows};
use crate::apiserver::auth::user::UserInfo;
use crate::apiserver::error::ApiError;

/// An authorizer's answer: allowed, or not with the reason (empty, or
/// `RBAC: ...` when a binding names a missing role).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
}

/// Whether `user` may do what `attributes` say.
pub fn decide(source: &dyn PolicySource, user: &UserInfo, attributes: &Attributes) -> Decision {
    if user.is_master() {
        return Decision::Allow;
    }
    let namespace = attributes.resource().map_or("", |r| r.namespace.as_str());
    let mut allowed = false;
    let errors = visit_rules(source, user, namespace, &mut |rule| {
        allowed = allows(rule, &attributes.verb, &attributes.target);
        allowed
    });
    if allowed {
        return Decision::Allow;
    }
    let reason = match errors.as_slice() {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    };
    Decision::Deny(reason)
}

/// `Ok` when `user` may; otherwise the 403 kube-apiserver sends.
pub fn authorize(
    source: &dyn PolicySource,
    user: &UserInfo,
    attributes: &Attributes,
) -> Result<(), ApiError> {
    match decide(source, user, attributes) {
        Decision::Allow => Ok(()),
        Decision::Deny(reason) => Err(forbidden(user, attributes, &reason)),
    }
}

/// kube-apiserver's `User "x" cannot get resource "pods" in API group ""
/// in the namespace "ns"` (or `at the cluster scope`, or `cannot get path
/// "/api"`).
pub fn denial(user: &UserInfo, attributes: &Attributes) -> String {
    let verb = &attributes.verb;
    let user = &user.name;
    match &attributes.target {
        Target::Path(path) => format!("User {user:?} cannot {verb} path {path:?}"),
        Target::Resource(r) => {
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {:?}", r.namespace)
            };
            format!(
                "User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
                r.group
            )
        }
    }
}

/// The 403 for a denied request, `reason` appended when there is one.
pub fn forbidden(user: &UserInfo, attributes: &Attributes, reason: &str) -> ApiError {
    let mut text = denial(user, attributes);
    if !reason.is_empty() {
        text = format!("{text}: {reason}");
    }
    match attributes.resource() {
        None => forbidden_error("", "", "", &text),
        Some(r) => forbidden_error(&r.group, &r.resource, &r.name, &text),
    }
}

/// kube-apiserver's `NewForbidden`: `pods "web" is forbidden: ...`,
/// `pods is forbidden: ...` without a name, `forbidden: ...` without a
/// resource.
pub fn forbidden_error(group: &str, resource: &str, name: &str, text: &str) -> ApiError {
    let qualified = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    let message = match (qualified.is_empty(), name.is_empty()) {
        (true, _) => format!("forbidden: {text}"),
        (false, true) => format!("{qualified} is forbidden: {text}"),
        (false, false) => format!("{qualified} {name:?} is forbidden: {text}"),
    };
    ApiError::ForbiddenResource {
        group: group.to_owned(),
        resource: resource.to_owned(),
        name: name.to_owned(),
        message,
    }
}
