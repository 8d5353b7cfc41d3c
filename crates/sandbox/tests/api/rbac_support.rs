//! What the RBAC tests share: Roles, ClusterRoles and bindings made by
//! the admin, and the status of a refused request.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

/// A Role `name` in `namespace` with these rules, made by `client`.
pub async fn role(
    client: &Client,
    namespace: &str,
    name: &str,
    rules: Value,
) -> Result<Role, kube::Error> {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "rules": rules,
    }))
    .expect("a valid Role");
    Api::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
}

/// A ClusterRole `name` with these rules, made by `client`.
pub async fn cluster_role(
    client: &Client,
    name: &str,
    rules: Value,
) -> Result<ClusterRole, kube::Error> {
    let role: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules}))
            .expect("a valid ClusterRole");
    Api::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
}

fn service_account_subject(account: &str) -> Value {
    let (namespace, name) = account.split_once('/').expect("namespace/name");
    json!({"kind": "ServiceAccount", "namespace": namespace, "name": name})
}

/// A RoleBinding in `namespace` of the role `kind/role` (`Role/x` or
/// `ClusterRole/x`) to the ServiceAccount `account` (`namespace/name`).
pub async fn role_binding(
    client: &Client,
    namespace: &str,
    name: &str,
    role_ref: &str,
    account: &str,
) -> Result<RoleBinding, kube::Error> {
    let (kind, role) = role_ref.split_once('/').expect("Kind/name");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [service_account_subject(account)],
    }))
    .expect("a valid RoleBinding");
    Api::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
}

/// A ClusterRoleBinding of the ClusterRole `role` to `subject`.
pub async fn cluster_role_binding(
    client: &Client,
    name: &str,
    role: &str,
    subject: Value,
) -> Result<ClusterRoleBinding, kube::Error> {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }))
    .expect("a valid ClusterRoleBinding");
    Api::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
}

/// The ServiceAccount subject `namespace/name`.
pub fn account(account: &str) -> Value {
    service_account_subject(account)
}

/// The Status of a refused request; panics on success or another error.
pub fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Asserts a 403 with kube-apiserver's message and details.
pub fn assert_forbidden<T: std::fmt::Debug>(
    result: Result<T, kube::Error>,
    message: &str,
    (group, kind, name): (&str, &str, &str),
) {
    let status = refusal(result);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(status.message, message);
    let details = status.details.expect("details");
    assert_eq!(
        (
            details.group.as_str(),
            details.kind.as_str(),
            details.name.as_str()
        ),
        (group, kind, name)
    );
}
