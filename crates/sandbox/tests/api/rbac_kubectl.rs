//! RBAC with the machine's kubectl: a ServiceAccount's `--token` refused
//! with kube-apiserver's Forbidden message, and `kubectl auth can-i` and
//! `whoami` answered for it.

use serde_json::json;
use tusk_sandbox::apiserver::auth::TokenOptions;

use crate::common::TestSandbox;
use crate::kubectl::{kubectl, succeed, text};
use crate::rbac_support::{role, role_binding};
use crate::tokens::create_service_account;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_uses_service_account_tokens_under_rbac() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "viewer").await;
    let issued = t
        .sandbox
        .issue_token("default", "viewer", &TokenOptions::default())
        .expect("a token");
    let token = format!("--token={}", issued.token);
    let denied = kubectl(&t, &[&token, "get", "pods"]);
    assert!(!denied.status.success());
    assert!(
        text(&denied).contains("Error from server (Forbidden): pods is forbidden: User \"system:serviceaccount:default:viewer\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{}",
        text(&denied)
    );
    let no = kubectl(&t, &[&token, "auth", "can-i", "list", "pods"]);
    assert_eq!(
        String::from_utf8_lossy(&no.stdout).trim(),
        "no",
        "{}",
        text(&no)
    );
    let rules =
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]);
    role(&t.client, "default", "pod-reader", rules)
        .await
        .expect("role");
    role_binding(
        &t.client,
        "default",
        "viewer-pods",
        "Role/pod-reader",
        "default/viewer",
    )
    .await
    .expect("binding");
    let yes = succeed(&t, &[&token, "auth", "can-i", "list", "pods"]);
    assert_eq!(yes.trim(), "yes");
    let no = kubectl(&t, &[&token, "auth", "can-i", "delete", "pods"]);
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    let listed = succeed(&t, &[&token, "get", "pods"]);
    assert!(listed.contains("No resources found"), "{listed}");
    let whoami = succeed(&t, &[&token, "auth", "whoami"]);
    assert!(
        whoami.contains("system:serviceaccount:default:viewer"),
        "{whoami}"
    );
    let admin = kubectl(&t, &["auth", "can-i", "delete", "nodes"]);
    assert_eq!(
        String::from_utf8_lossy(&admin.stdout).trim(),
        "yes",
        "{}",
        text(&admin)
    );
}
