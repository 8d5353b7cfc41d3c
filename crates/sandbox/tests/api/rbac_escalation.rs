//! Escalation prevention: Role and ClusterRole writes need the
//! permissions they grant (or `escalate`), binding writes need `bind` on
//! the role (or its permissions), with kube-apiserver's refusal.

use k8s_openapi::api::rbac::v1::Role;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tusk_sandbox::testing::client_for_service_account;

use crate::common::TestSandbox;
use crate::common::code;
use crate::rbac_support::{
    account, assert_forbidden, cluster_role, cluster_role_binding, refusal, role, role_binding,
};
use crate::tokens::create_service_account;

const GROUPS: &str =
    r#"["system:serviceaccounts" "system:serviceaccounts:default" "system:authenticated"]"#;

async fn account_with(t: &TestSandbox, name: &str, rules: serde_json::Value) -> Client {
    create_service_account(&t.client, "default", name).await;
    role(&t.client, "default", name, rules).await.expect("role");
    role_binding(
        &t.client,
        "default",
        name,
        &format!("Role/{name}"),
        &format!("default/{name}"),
    )
    .await
    .expect("binding");
    client_for_service_account(&t.sandbox, "default", name).await
}

fn pods(verbs: &[&str]) -> serde_json::Value {
    json!({"apiGroups": [""], "resources": ["pods"], "verbs": verbs})
}

#[tokio::test]
async fn roles_granting_more_than_their_author_holds_are_refused_unless_it_may_escalate() {
    let t = TestSandbox::start().await;
    let write_roles = json!({"apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "clusterroles"], "verbs": ["create", "update", "patch"]});
    let author = account_with(&t, "author", json!([write_roles, pods(&["get"])])).await;
    role(&author, "default", "fine", json!([pods(&["get"])]))
        .await
        .expect("held");
    let too_much = json!([pods(&["get", "delete"]),
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]);
    let user = "system:serviceaccount:default:author";
    assert_forbidden(
        role(&author, "default", "too-much", too_much.clone()).await,
        &format!(
            "roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"{user}\" (groups={GROUPS}) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}}\n{{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\"]}}"
        ),
        ("rbac.authorization.k8s.io", "roles", "too-much"),
    );
    let roles: Api<Role> = Api::default_namespaced(author.clone());
    let grow = Patch::Merge(json!({"rules": [pods(&["get", "delete"])]}));
    let refused = refusal(roles.patch("fine", &PatchParams::default(), &grow).await);
    assert_eq!(
        refused.code, 403,
        "an update is checked too: {}",
        refused.message
    );
    let write_cluster_roles = json!([{"apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"], "verbs": ["create"]}]);
    cluster_role(&t.client, "cluster-role-writer", write_cluster_roles)
        .await
        .expect("role");
    cluster_role_binding(
        &t.client,
        "cluster-role-writer",
        "cluster-role-writer",
        account("default/author"),
    )
    .await
    .expect("binding");
    // Cluster-wide, the author holds no pod permission: its Role is namespaced.
    let refused = refusal(cluster_role(&author, "pods", json!([pods(&["get"])])).await);
    assert!(
        refused.message.ends_with(
            "not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}"
        ),
        "{}",
        refused.message
    );
    let escalate = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}]);
    cluster_role(&t.client, "escalator", escalate)
        .await
        .expect("role");
    cluster_role_binding(
        &t.client,
        "escalator",
        "escalator",
        account("default/author"),
    )
    .await
    .expect("binding");
    role(&author, "default", "too-much", too_much)
        .await
        .expect("escalate allows it");
    roles
        .patch("fine", &PatchParams::default(), &grow)
        .await
        .expect("and updates");
}

#[tokio::test]
async fn bindings_need_bind_on_their_role_or_its_permissions() {
    let t = TestSandbox::start().await;
    let write_bindings = json!({"apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["rolebindings"], "verbs": ["create"]});
    let binder = account_with(&t, "binder", json!([write_bindings])).await;
    create_service_account(&t.client, "default", "app").await;
    role(&t.client, "default", "pod-reader", json!([pods(&["get"])]))
        .await
        .expect("role");
    let secrets = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
    role(&t.client, "default", "secret-reader", secrets)
        .await
        .expect("role");
    let user = "system:serviceaccount:default:binder";
    assert_forbidden(
        role_binding(&binder, "default", "b1", "Role/pod-reader", "default/app").await,
        &format!(
            "rolebindings.rbac.authorization.k8s.io \"b1\" is forbidden: user \"{user}\" (groups={GROUPS}) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}}"
        ),
        ("rbac.authorization.k8s.io", "rolebindings", "b1"),
    );
    let bind = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
        "resourceNames": ["pod-reader"], "verbs": ["bind"]}]);
    role(&t.client, "default", "bind-pod-reader", bind)
        .await
        .expect("role");
    role_binding(
        &t.client,
        "default",
        "bind",
        "Role/bind-pod-reader",
        "default/binder",
    )
    .await
    .expect("binding");
    role_binding(&binder, "default", "b1", "Role/pod-reader", "default/app")
        .await
        .expect("bind allows it");
    let refused = refusal(
        role_binding(
            &binder,
            "default",
            "b2",
            "Role/secret-reader",
            "default/app",
        )
        .await,
    );
    assert_eq!(refused.code, 403, "bind names one role only");
    role_binding(
        &t.client,
        "default",
        "own-secrets",
        "Role/secret-reader",
        "default/binder",
    )
    .await
    .expect("binding");
    role_binding(
        &binder,
        "default",
        "b2",
        "Role/secret-reader",
        "default/app",
    )
    .await
    .expect("holding the permissions allows it");
    let missing = role_binding(&binder, "default", "b3", "Role/ghost", "default/app")
        .await
        .expect_err("no such role");
    assert_eq!(code(&missing), 404);
}
