//! RBAC through kube-rs with ServiceAccount tokens: what a binding
//! allows per verb, subresource, resource name, namespace and
//! non-resource URL, kube-apiserver's 403 bodies, the default policy, and
//! the access reviews kubectl's `auth` commands use.

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;
use tusk_sandbox::testing::client_for_service_account;

use crate::common::{TestSandbox, config_map};
use crate::rbac_support::{
    account, assert_forbidden, cluster_role, cluster_role_binding, role, role_binding,
};
use crate::tokens::create_service_account;

const READER: &str = "system:serviceaccount:default:reader";

async fn reader(t: &TestSandbox) -> Client {
    create_service_account(&t.client, "default", "reader").await;
    client_for_service_account(&t.sandbox, "default", "reader").await
}

#[tokio::test]
async fn a_service_account_may_do_only_what_its_role_allows() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]);
    role(&t.client, "default", "cm-reader", rules)
        .await
        .expect("role");
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    assert_forbidden(
        configmaps.list(&ListParams::default()).await,
        &format!(
            "configmaps is forbidden: User \"{READER}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        ("", "configmaps", ""),
    );
    role_binding(
        &t.client,
        "default",
        "read",
        "Role/cm-reader",
        "default/reader",
    )
    .await
    .expect("binding");
    configmaps
        .list(&ListParams::default())
        .await
        .expect("list allowed");
    let admin_maps: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    admin_maps
        .create(
            &PostParams::default(),
            &config_map("app", json!({"a": "1"})),
        )
        .await
        .expect("the admin may do anything");
    configmaps.get("app").await.expect("get allowed");
    assert_forbidden(
        configmaps
            .create(&PostParams::default(), &config_map("mine", json!({})))
            .await,
        &format!(
            "configmaps is forbidden: User \"{READER}\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        ("", "configmaps", ""),
    );
    assert_forbidden(
        configmaps.delete("app", &Default::default()).await,
        &format!(
            "configmaps \"app\" is forbidden: User \"{READER}\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        ("", "configmaps", "app"),
    );
    let watched = configmaps.watch(&WatchParams::default(), "0").await;
    assert_forbidden(
        watched.map(|_| ()),
        &format!(
            "configmaps is forbidden: User \"{READER}\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        ("", "configmaps", ""),
    );
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    assert_forbidden(
        elsewhere.list(&ListParams::default()).await,
        &format!(
            "configmaps is forbidden: User \"{READER}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
        ),
        ("", "configmaps", ""),
    );
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("valid Pod")
}

#[tokio::test]
async fn subresources_are_authorized_apart_from_their_resource() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    let admin_pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    admin_pods
        .create(&PostParams::default(), &pod("web"))
        .await
        .expect("pod");
    let rules = json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    ]);
    role(&t.client, "default", "status-writer", rules)
        .await
        .expect("role");
    role_binding(
        &t.client,
        "default",
        "w",
        "Role/status-writer",
        "default/reader",
    )
    .await
    .expect("binding");
    let pods: Api<Pod> = Api::default_namespaced(client);
    let status = Patch::Merge(json!({"status": {"message": "hello"}}));
    pods.patch_status("web", &PatchParams::default(), &status)
        .await
        .expect("pods/status may be patched");
    let labels = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    assert_forbidden(
        pods.patch("web", &PatchParams::default(), &labels).await,
        &format!(
            "pods \"web\" is forbidden: User \"{READER}\" cannot patch resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
        ("", "pods", "web"),
    );
    assert_forbidden(
        pods.get_status("web").await,
        &format!(
            "pods \"web\" is forbidden: User \"{READER}\" cannot get resource \"pods/status\" in API group \"\" in the namespace \"default\""
        ),
        ("", "pods", "web"),
    );
}

#[tokio::test]
async fn resource_names_allow_one_object_and_watching_it_by_field_selector() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    let admin_maps: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for name in ["mine", "theirs"] {
        admin_maps
            .create(&PostParams::default(), &config_map(name, json!({})))
            .await
            .expect("configmap");
    }
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"],
        "resourceNames": ["mine"], "verbs": ["get", "list", "watch"]}]);
    role(&t.client, "default", "one", rules)
        .await
        .expect("role");
    role_binding(&t.client, "default", "one", "Role/one", "default/reader")
        .await
        .expect("binding");
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client);
    configmaps.get("mine").await.expect("the named object");
    assert_forbidden(
        configmaps.get("theirs").await,
        &format!(
            "configmaps \"theirs\" is forbidden: User \"{READER}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        ("", "configmaps", "theirs"),
    );
    assert_eq!(
        crate::common::code(
            &configmaps
                .list(&ListParams::default())
                .await
                .expect_err("all")
        ),
        403
    );
    let one = WatchParams::default().fields("metadata.name=mine");
    let mut events = configmaps
        .watch(&one, "0")
        .await
        .expect("watching one name")
        .boxed();
    let first = tokio::time::timeout(crate::common::WAIT, events.next())
        .await
        .expect("an event in time")
        .expect("an event")
        .expect("not an error");
    assert!(
        matches!(first, kube::api::WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("mine"))
    );
    let listed = configmaps
        .list(&ListParams::default().fields("metadata.name=mine"))
        .await
        .expect("a list selecting the name");
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test]
async fn cluster_bindings_grant_everywhere_and_role_bindings_in_their_namespace() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    let team: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &team)
        .await
        .expect("namespace");
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps", "namespaces"], "verbs": ["list", "get"]}]);
    cluster_role(&t.client, "viewer", rules)
        .await
        .expect("cluster role");
    role_binding(
        &t.client,
        "team",
        "view",
        "ClusterRole/viewer",
        "default/reader",
    )
    .await
    .expect("binding");
    let in_team: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    in_team
        .list(&ListParams::default())
        .await
        .expect("in its namespace");
    let own: Api<Namespace> = Api::all(client.clone());
    own.get("team").await.expect("a namespace is in itself");
    let in_default: Api<ConfigMap> = Api::default_namespaced(client.clone());
    assert_eq!(
        crate::common::code(
            &in_default
                .list(&ListParams::default())
                .await
                .expect_err("default")
        ),
        403
    );
    assert_forbidden(
        own.list(&ListParams::default()).await,
        &format!(
            "namespaces is forbidden: User \"{READER}\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        ),
        ("", "namespaces", ""),
    );
    cluster_role_binding(&t.client, "view-all", "viewer", account("default/reader"))
        .await
        .expect("cluster binding");
    in_default
        .list(&ListParams::default())
        .await
        .expect("everywhere now");
    own.list(&ListParams::default())
        .await
        .expect("cluster-scoped too");
}

#[tokio::test]
async fn a_binding_to_a_missing_role_is_named_in_the_denial() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    role_binding(
        &t.client,
        "default",
        "dangling",
        "Role/ghost",
        "default/reader",
    )
    .await
    .expect("a binding may name a missing role");
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client);
    assert_forbidden(
        configmaps.list(&ListParams::default()).await,
        &format!(
            "configmaps is forbidden: User \"{READER}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"
        ),
        ("", "configmaps", ""),
    );
}

async fn get_path(client: &Client, path: &str) -> Result<String, kube::Error> {
    let request = axum::http::Request::get(path)
        .body(Vec::new())
        .expect("request");
    client.request_text(request).await
}

#[tokio::test]
async fn non_resource_urls_follow_the_default_policy_and_cluster_roles() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    get_path(&client, "/api")
        .await
        .expect("discovery for everyone authenticated");
    get_path(&client, "/apis/rbac.authorization.k8s.io/v1")
        .await
        .expect("discovery");
    get_path(&client, "/version").await.expect("public info");
    assert_forbidden(
        get_path(&client, "/metrics").await,
        &format!("forbidden: User \"{READER}\" cannot get path \"/metrics\""),
        ("", "", ""),
    );
    let rules = json!([{"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}]);
    cluster_role(&t.client, "metrics", rules)
        .await
        .expect("role");
    cluster_role_binding(&t.client, "metrics", "metrics", account("default/reader"))
        .await
        .expect("binding");
    let served = get_path(&client, "/metrics").await.expect_err("not served");
    assert_eq!(
        crate::common::code(&served),
        404,
        "authorized, then not found"
    );
    let served = get_path(&client, "/debug/pprof")
        .await
        .expect_err("not served");
    assert_eq!(crate::common::code(&served), 404);
}

#[tokio::test]
async fn the_default_policy_exists_and_reviews_answer_for_the_caller() {
    let t = TestSandbox::start().await;
    let roles: Api<ClusterRole> = Api::all(t.client.clone());
    for name in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        roles
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let client = reader(&t).await;
    let rules = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
    role(&t.client, "default", "secrets", rules)
        .await
        .expect("role");
    role_binding(
        &t.client,
        "default",
        "secrets",
        "Role/secrets",
        "default/reader",
    )
    .await
    .expect("binding");
    let can = |verb: &str, resource: &str, namespace: &str| {
        let review: SelfSubjectAccessReview = serde_json::from_value(json!({
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}}
        }))
        .expect("review");
        let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
        async move {
            let answer = api
                .create(&PostParams::default(), &review)
                .await
                .expect("answered");
            answer.status.expect("status").allowed
        }
    };
    assert!(can("get", "secrets", "default").await);
    assert!(!can("list", "secrets", "default").await);
    assert!(!can("get", "secrets", "kube-system").await);
    let whoami: Api<SelfSubjectReview> = Api::all(client.clone());
    let me = whoami
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("whoami");
    let info = me.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(info.username.as_deref(), Some(READER));
    assert!(
        info.groups
            .unwrap_or_default()
            .contains(&"system:serviceaccounts:default".to_owned())
    );
}

#[tokio::test]
async fn requests_without_credentials_reach_only_the_public_endpoints() {
    let t = TestSandbox::start().await;
    let kubeconfig =
        kube::config::Kubeconfig::read_from(t.sandbox.kubeconfig_path()).expect("reads");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    config.auth_info = Default::default();
    let anonymous = Client::try_from(config).expect("client");
    get_path(&anonymous, "/version").await.expect("public");
    get_path(&anonymous, "/healthz").await.expect("public");
    let refused = get_path(&anonymous, "/api")
        .await
        .expect_err("not anonymous");
    assert_eq!(crate::common::code(&refused), 401);
}

#[tokio::test]
async fn subject_access_reviews_answer_about_another_user_for_those_allowed() {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]);
    role(&t.client, "default", "pods", rules)
        .await
        .expect("role");
    role_binding(&t.client, "default", "pods", "Role/pods", "default/reader")
        .await
        .expect("binding");
    let review = |verb: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {
            "user": READER,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": "pods", "namespace": "default"},
        }}))
        .expect("review")
    };
    let admin: Api<SubjectAccessReview> = Api::all(t.client.clone());
    let pp = PostParams::default();
    let allowed = |r: SubjectAccessReview| r.status.expect("status").allowed;
    assert!(allowed(
        admin.create(&pp, &review("list")).await.expect("answered")
    ));
    assert!(!allowed(
        admin
            .create(&pp, &review("delete"))
            .await
            .expect("answered")
    ));
    let own: Api<SubjectAccessReview> = Api::all(client);
    assert_forbidden(
        own.create(&pp, &review("list")).await,
        &format!(
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{READER}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        ),
        ("authorization.k8s.io", "subjectaccessreviews", ""),
    );
}

/// The status of a GET on `pods/web/exec` as a WebSocket exec opens it.
async fn exec_get_status(client: &Client) -> u16 {
    let request = axum::http::Request::get("/api/v1/namespaces/default/pods/web/exec?command=true")
        .body(Vec::new())
        .expect("request");
    match client.request_text(request).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_websocket_exec_needs_create_as_well_as_get() {
    let t = TestSandbox::start().await;
    let client = reader(&t).await;
    let only_get = json!([{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"]}]);
    role(&t.client, "default", "exec", only_get)
        .await
        .expect("role");
    role_binding(&t.client, "default", "exec", "Role/exec", "default/reader")
        .await
        .expect("binding");
    assert_eq!(
        exec_get_status(&client).await,
        403,
        "get alone runs nothing"
    );
    let with_create =
        json!([{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]}]);
    Api::<k8s_openapi::api::rbac::v1::Role>::default_namespaced(t.client.clone())
        .patch(
            "exec",
            &PatchParams::default(),
            &Patch::Merge(&json!({"rules": with_create})),
        )
        .await
        .expect("grant create");
    // Authorized now: the pod does not exist.
    assert_eq!(exec_get_status(&client).await, 404);
}
