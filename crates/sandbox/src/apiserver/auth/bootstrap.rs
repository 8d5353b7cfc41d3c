//! kube-apiserver's default RBAC policy, which the sandbox creates at
//! start when missing: `cluster-admin` (everything) bound to
//! `system:masters`, `system:discovery` and `system:basic-user` bound to
//! every authenticated user, and `system:public-info-viewer` bound to
//! everyone, authenticated or not.

use serde_json::{Value, json};

use crate::apiserver::auth::resolver::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES};
use crate::apiserver::auth::user::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Value) -> (&'static str, Value) {
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name),
        "rules": rules,
    });
    (CLUSTER_ROLES, role)
}

fn binding(name: &str, groups: &[&str]) -> (&'static str, Value) {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    });
    (CLUSTER_ROLE_BINDINGS, binding)
}

/// The default ClusterRoles and ClusterRoleBindings, as (storage key of
/// the resource, object).
pub fn default_policy() -> Vec<(&'static str, Value)> {
    let discovery = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    let public = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    vec![
        cluster_role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        binding("cluster-admin", &[MASTERS]),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": discovery, "verbs": ["get"]}]),
        ),
        binding("system:discovery", &[AUTHENTICATED]),
        cluster_role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                 "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"],
                 "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
        binding("system:basic-user", &[AUTHENTICATED]),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": public, "verbs": ["get"]}]),
        ),
        binding(
            "system:public-info-viewer",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
    ]
}
