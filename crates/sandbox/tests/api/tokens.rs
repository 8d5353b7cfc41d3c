//! ServiceAccount tokens: TokenRequest through kube-rs, the tokens it
//! issues authenticating as their ServiceAccount, and every way a token
//! stops being valid (deleted or recreated ServiceAccount, deleted bound
//! pod, expiry, another audience, a restart keeps the key).

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tusk_sandbox::apiserver::auth::{BoundObject, TokenOptions};
use tusk_sandbox::testing::{client_for_service_account, client_with_token, serve};

use crate::common::{TestSandbox, code};

pub async fn create_service_account(client: &Client, namespace: &str, name: &str) -> String {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("valid");
    let created = api
        .create(&PostParams::default(), &account)
        .await
        .expect("the ServiceAccount is created");
    created.metadata.uid.expect("a uid")
}

async fn request_token(client: &Client, name: &str, spec: Value) -> Result<Value, kube::Error> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    api.create_subresource("token", name, &PostParams::default(), &body)
        .await
}

/// Whether `client` is authenticated: `/api` serves every authenticated
/// user (system:discovery) and refuses requests without valid credentials.
async fn authenticated(client: &Client) -> Result<(), u16> {
    match client.list_core_api_versions().await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.code),
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

#[tokio::test]
async fn token_request_issues_a_token_for_an_existing_service_account() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "reader").await;
    let response = request_token(&t.client, "reader", json!({"expirationSeconds": 1200}))
        .await
        .expect("a token");
    assert_eq!(response["kind"], "TokenRequest");
    assert_eq!(response["spec"]["expirationSeconds"], 1200);
    assert_eq!(
        response["spec"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    let expires = response["status"]["expirationTimestamp"]
        .as_str()
        .expect("an expiration");
    let expires: jiff::Timestamp = expires.parse().expect("RFC 3339");
    let lifetime = expires.as_second() - jiff::Timestamp::now().as_second();
    assert!((1100..=1200).contains(&lifetime), "lifetime {lifetime}");
    let token = response["status"]["token"].as_str().expect("a token");
    let client = client_with_token(&t.sandbox, token).await;
    authenticated(&client)
        .await
        .expect("the token authenticates");
    let wrong = client_with_token(&t.sandbox, &format!("{token}x")).await;
    assert_eq!(authenticated(&wrong).await, Err(401));
}

#[tokio::test]
async fn token_request_validation_errors_name_the_field() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "reader").await;
    let short = request_token(&t.client, "reader", json!({"expirationSeconds": 300}))
        .await
        .expect_err("too short");
    let kube::Error::Api(status) = &short else {
        panic!("expected an API error, got {short:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"
    );
    let missing = request_token(&t.client, "nobody", json!({}))
        .await
        .expect_err("no SA");
    assert_eq!(code(&missing), 404);
    let bad_kind =
        json!({"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}});
    let refused = request_token(&t.client, "reader", bad_kind)
        .await
        .expect_err("kind");
    assert_eq!(code(&refused), 400);
    let no_pod = json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "ghost"}});
    let refused = request_token(&t.client, "reader", no_pod)
        .await
        .expect_err("pod");
    assert_eq!(code(&refused), 404);
    let wrong_type = request_token(&t.client, "reader", json!({"expirationSeconds": "long"}))
        .await
        .expect_err("type");
    assert_eq!(code(&wrong_type), 400);
}

fn pod(name: &str, account: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("valid Pod")
}

#[tokio::test]
async fn a_token_bound_to_a_pod_dies_with_the_pod() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "app").await;
    let pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    let created = pods
        .create(&PostParams::default(), &pod("web", "app"))
        .await
        .expect("pod");
    let uid = created.metadata.uid.expect("uid");
    let bound = |uid: &str| json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": uid}});
    let refused = request_token(&t.client, "default", bound(&uid))
        .await
        .expect_err("other SA");
    assert_eq!(code(&refused), 400);
    let refused = request_token(&t.client, "app", bound("not-the-uid"))
        .await
        .expect_err("uid");
    assert_eq!(code(&refused), 409);
    let response = request_token(&t.client, "app", bound(&uid))
        .await
        .expect("bound token");
    let token = response["status"]["token"].as_str().expect("token");
    let client = client_with_token(&t.sandbox, token).await;
    authenticated(&client)
        .await
        .expect("valid while the pod exists");
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(authenticated(&client).await, Err(401));
}

#[tokio::test]
async fn a_deleted_or_recreated_service_account_invalidates_its_tokens() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "temp").await;
    let client = client_for_service_account(&t.sandbox, "default", "temp").await;
    authenticated(&client).await.expect("valid");
    let accounts: Api<ServiceAccount> = Api::default_namespaced(t.client.clone());
    accounts
        .delete("temp", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(authenticated(&client).await, Err(401));
    create_service_account(&t.client, "default", "temp").await;
    assert_eq!(authenticated(&client).await, Err(401), "a new uid");
    let fresh = client_for_service_account(&t.sandbox, "default", "temp").await;
    authenticated(&fresh).await.expect("a new token is valid");
}

#[tokio::test]
async fn expired_tokens_and_tokens_for_other_audiences_are_refused() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "old").await;
    let now = jiff::Timestamp::now().as_second();
    let expired = TokenOptions {
        issued_at: Some(now - 7200),
        expiration_seconds: 3600,
        ..Default::default()
    };
    let issued = t
        .sandbox
        .issue_token("default", "old", &expired)
        .expect("issued");
    let client = client_with_token(&t.sandbox, &issued.token).await;
    assert_eq!(authenticated(&client).await, Err(401));
    let vault = TokenOptions {
        audiences: vec!["vault".to_owned()],
        ..Default::default()
    };
    let issued = t
        .sandbox
        .issue_token("default", "old", &vault)
        .expect("issued");
    let client = client_with_token(&t.sandbox, &issued.token).await;
    assert_eq!(authenticated(&client).await, Err(401));
    let no_secret = TokenOptions {
        bound_object: Some(BoundObject {
            kind: "Secret".to_owned(),
            name: "missing".to_owned(),
            uid: String::new(),
        }),
        ..Default::default()
    };
    let error = t
        .sandbox
        .issue_token("default", "old", &no_secret)
        .expect_err("no secret");
    assert_eq!(error.code(), 404);
}

#[tokio::test]
async fn tokens_survive_a_restart_on_the_same_data_directory() {
    let t = TestSandbox::start().await;
    create_service_account(&t.client, "default", "keeper").await;
    let issued = t
        .sandbox
        .issue_token("default", "keeper", &TokenOptions::default())
        .expect("issued");
    let TestSandbox { sandbox, dir, .. } = t;
    drop(sandbox);
    let (restarted, _) = serve(dir.path(), |config| config).await;
    let client = client_with_token(&restarted, &issued.token).await;
    authenticated(&client).await.expect("the key was kept");
}
