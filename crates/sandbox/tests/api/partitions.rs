//! A pod cut off from the API server: requests with its bound token go
//! unanswered (as packets dropped by a partition) and its watches hear
//! nothing, while everyone else is served; healing lets it through again.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Client;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tusk_sandbox::apiserver::auth::{BoundObject, TokenOptions};
use tusk_sandbox::testing::client_with_token;

use crate::common::{TestSandbox, config_map};
use crate::tokens::create_service_account;

const WAIT: Duration = Duration::from_secs(10);
/// How long an unanswered request is given before the test calls it dropped.
const SILENCE: Duration = Duration::from_secs(1);

/// Whether `/api` answers within [`SILENCE`].
async fn answers(client: &Client) -> bool {
    tokio::time::timeout(SILENCE, client.list_core_api_versions())
        .await
        .is_ok_and(|r| r.is_ok())
}

async fn pod_with_tokens(t: &TestSandbox) -> (Client, Client) {
    create_service_account(&t.client, "default", "app").await;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "app-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "default"}]
    });
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(t.client.clone());
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).expect("binding"),
        )
        .await
        .expect("binding created");
    let pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"serviceAccountName": "app", "nodeName": "node-a",
                 "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("pod");
    let pod = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let bound = TokenOptions {
        bound_object: Some(BoundObject {
            kind: "Pod".into(),
            name: "web".into(),
            uid: pod.metadata.uid.expect("uid"),
        }),
        ..TokenOptions::default()
    };
    let issue = |options: &TokenOptions| {
        t.sandbox
            .issue_token("default", "app", options)
            .expect("token")
            .token
    };
    let pod_client = client_with_token(&t.sandbox, &issue(&bound)).await;
    let other = client_with_token(&t.sandbox, &issue(&TokenOptions::default())).await;
    (pod_client, other)
}

#[tokio::test]
async fn a_pod_cut_off_from_the_api_server_is_not_answered_until_healed() {
    let t = TestSandbox::start().await;
    let (pod, other) = pod_with_tokens(&t).await;
    assert!(answers(&pod).await, "served before the cut");
    let partitions = t.sandbox.faults().partitions();
    partitions.cut_pod("default", "web");
    assert!(!answers(&pod).await, "the pod's requests go unanswered");
    assert!(
        answers(&other).await,
        "the same ServiceAccount elsewhere is served"
    );
    assert!(answers(&t.client).await, "the admin is served");
    let pending = tokio::spawn(async move { pod.list_core_api_versions().await.map(|_| pod) });
    partitions.heal_pod("default", "web");
    let pod = tokio::time::timeout(WAIT, pending)
        .await
        .expect("a request made during the cut is answered once it heals")
        .expect("joined")
        .expect("answered");
    assert!(answers(&pod).await, "served again");

    // A node cut off takes its pods with it.
    partitions.cut_node("node-a");
    assert!(!answers(&pod).await, "the node's pod goes unanswered");
    partitions.cut_node("node-b");
    partitions.heal_node("node-a");
    assert!(answers(&pod).await, "served once its node is back");
}

#[tokio::test]
async fn a_cut_off_pod_s_watch_hears_nothing_until_healed() {
    let t = TestSandbox::start().await;
    let (pod, _) = pod_with_tokens(&t).await;
    let watched: Api<ConfigMap> = Api::default_namespaced(pod);
    let mut events = watched
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let admin: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    admin
        .create(&PostParams::default(), &config_map("before", json!({})))
        .await
        .expect("created");
    // The initial events (kube-root-ca.crt), then "before".
    loop {
        let seen = tokio::time::timeout(WAIT, events.try_next())
            .await
            .expect("an event in time")
            .expect("event");
        match seen {
            Some(WatchEvent::Added(map)) if map.metadata.name.as_deref() == Some("before") => break,
            Some(WatchEvent::Added(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let partitions = t.sandbox.faults().partitions();
    partitions.cut_pod("default", "web");
    admin
        .create(&PostParams::default(), &config_map("during", json!({})))
        .await
        .expect("created");
    let silent = tokio::time::timeout(SILENCE, events.try_next()).await;
    assert!(
        silent.is_err(),
        "nothing reaches a cut-off watch: {silent:?}"
    );
    partitions.heal_pod("default", "web");
    let seen = tokio::time::timeout(WAIT, events.try_next())
        .await
        .expect("the held event arrives after healing")
        .expect("event");
    match seen {
        Some(WatchEvent::Added(map)) => assert_eq!(map.metadata.name.as_deref(), Some("during")),
        other => panic!("expected the held event, got {other:?}"),
    }
}
