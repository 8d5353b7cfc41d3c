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
    let list = succeed(&t, &[&token, "auth", "can-i", "--list"]);
    let pods_line = list
        .lines()
        .find(|l| l.starts_with("pods "))
        .unwrap_or_default();
    assert!(pods_line.contains("[get list watch]"), "{list}");
    assert!(
        list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{list}"
    );
    assert!(!list.contains("secrets"), "{list}");
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

/// The claims of a JWT, unverified.
fn claims(token: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

fn create_token(t: &TestSandbox, args: &[&str]) -> String {
    let output = kubectl(t, &[&["create", "token", "viewer"], args].concat());
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_requests_tokens_with_audiences_lifetimes_and_bound_pods() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, PostParams};
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "viewer").await;
    let token = create_token(&t, &["--duration=20m", "--audience=one", "--audience=two"]);
    let c = claims(&token);
    assert_eq!(c["aud"], json!(["one", "two"]));
    assert_eq!(
        c["exp"].as_i64().zip(c["iat"].as_i64()).map(|(e, i)| e - i),
        Some(1200)
    );
    assert_eq!(c["sub"], "system:serviceaccount:default:viewer");
    let pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"serviceAccountName": "viewer", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let token = create_token(&t, &["--bound-object-kind=Pod", "--bound-object-name=web"]);
    assert_eq!(claims(&token)["kubernetes.io"]["pod"]["name"], "web");
    let flag = format!("--token={token}");
    let whoami = succeed(&t, &[&flag, "auth", "whoami"]);
    assert!(
        whoami.contains("system:serviceaccount:default:viewer"),
        "{whoami}"
    );
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("deleted");
    let refused = kubectl(&t, &[&flag, "auth", "whoami"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("Unauthorized"),
        "{}",
        text(&refused)
    );
}
