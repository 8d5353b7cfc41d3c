//! The review endpoints clients ask about permissions and identity with:
//! SelfSubjectAccessReview (`kubectl auth can-i`), SubjectAccessReview
//! (about another user, for those allowed to create it),
//! SelfSubjectRulesReview (`kubectl auth can-i --list`) and
//! SelfSubjectReview (`kubectl auth whoami`). Nothing is stored: each
//! create answers in `status`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::apiserver::auth::attributes::Attributes;
use crate::apiserver::auth::authorizer::{Decision, decide};
use crate::apiserver::auth::resolver::{PolicySource, rules_for};
use crate::apiserver::auth::rules::{ResourceTarget, Target};
use crate::apiserver::auth::user::UserInfo;
use crate::apiserver::error::{ApiError, Cause};

/// The review resources: (group, plural, kind, namespaced).
pub const REVIEWS: &[(&str, &str, &str, bool)] = &[
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
];

/// The kind of a review resource, if `group/plural` is one.
pub fn review_kind(group: &str, plural: &str) -> Option<&'static str> {
    REVIEWS
        .iter()
        .find(|(g, p, _, _)| *g == group && *p == plural)
        .map(|(_, _, kind, _)| *kind)
}

/// Answers a review created by `user`; `namespace` is the URL's (for
/// LocalSubjectAccessReview).
pub fn create(
    source: &dyn PolicySource,
    user: &UserInfo,
    kind: &str,
    namespace: Option<&str>,
    body: &Value,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match kind {
        "SelfSubjectAccessReview" => access(source, user, kind, &spec, None)?,
        "SubjectAccessReview" => access(source, &subject(kind, &spec)?, kind, &spec, None)?,
        "LocalSubjectAccessReview" => {
            access(source, &subject(kind, &spec)?, kind, &spec, namespace)?
        }
        "SelfSubjectRulesReview" => rules_review(source, user, &spec),
        _ => json!({"userInfo": user_info(user)}),
    };
    let mut review = body.clone();
    if !review.is_object() {
        review = json!({});
    }
    review["status"] = status;
    review["metadata"]["creationTimestamp"] = Value::Null;
    Ok(review)
}

fn invalid(kind: &str, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        &format!("{kind}.authorization.k8s.io"),
        "",
        vec![Cause::invalid(field, message)],
    )
}

fn text<'v>(value: &'v Value, field: &str) -> &'v str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The user a SubjectAccessReview asks about.
fn subject(kind: &str, spec: &Value) -> Result<UserInfo, ApiError> {
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let name = text(spec, "user");
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            kind,
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .cloned()
        .and_then(|e| serde_json::from_value(e).ok())
        .unwrap_or_default();
    Ok(UserInfo {
        name: name.to_owned(),
        uid: text(spec, "uid").to_owned(),
        groups,
        extra,
    })
}

fn access(
    source: &dyn PolicySource,
    user: &UserInfo,
    kind: &str,
    spec: &Value,
    namespace: Option<&str>,
) -> Result<Value, ApiError> {
    let attributes = if let Some(r) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        let namespace = namespace.unwrap_or_else(|| text(r, "namespace"));
        Attributes {
            verb: text(r, "verb").to_owned(),
            target: Target::Resource(ResourceTarget {
                group: text(r, "group").to_owned(),
                resource: text(r, "resource").to_owned(),
                subresource: text(r, "subresource").to_owned(),
                name: text(r, "name").to_owned(),
                namespace: namespace.to_owned(),
            }),
        }
    } else if let Some(n) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        Attributes {
            verb: text(n, "verb").to_owned(),
            target: Target::Path(text(n, "path").to_owned()),
        }
    } else {
        return Err(invalid(
            kind,
            "spec.resourceAttributes",
            "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    Ok(match decide(source, user, &attributes) {
        Decision::Allow => json!({"allowed": true}),
        Decision::Deny(reason) if reason.is_empty() => json!({"allowed": false}),
        Decision::Deny(reason) => json!({"allowed": false, "reason": reason}),
    })
}

/// What the user may do in `spec.namespace`, as rules.
fn rules_review(source: &dyn PolicySource, user: &UserInfo, spec: &Value) -> Value {
    let namespace = text(spec, "namespace");
    let (rules, errors) = if user.is_master() {
        let all = json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]);
        let urls = json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]);
        return json!({"resourceRules": all, "nonResourceRules": urls, "incomplete": false});
    } else {
        rules_for(source, user, namespace)
    };
    let mut resource_rules = Vec::new();
    let mut url_rules = Vec::new();
    for rule in rules {
        if !rule.resources.is_empty() {
            resource_rules.push(json!({
                "verbs": rule.verbs,
                "apiGroups": rule.api_groups,
                "resources": rule.resources,
                "resourceNames": rule.resource_names,
            }));
        }
        if !rule.non_resource_urls.is_empty() {
            url_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": url_rules,
        "incomplete": !errors.is_empty(),
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    status
}

fn user_info(user: &UserInfo) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}
