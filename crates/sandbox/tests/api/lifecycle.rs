//! Deletion: finalizers and deletionTimestamp, owner-reference garbage
//! collection in its three propagation modes, and namespace deletion.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

use crate::common::{TestSandbox, WAIT, code, config_map, eventually};

fn owned_by(owner: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().expect("owner uid"),
        block_owner_deletion: Some(block),
        controller: Some(true),
    }
}

async fn child(
    api: &Api<ConfigMap>,
    name: &str,
    owner: &ConfigMap,
    block: bool,
    finalizer: bool,
) -> ConfigMap {
    let mut cm = config_map(name, json!({}));
    cm.metadata.owner_references = Some(vec![owned_by(owner, block)]);
    if finalizer {
        cm.metadata.finalizers = Some(vec!["test/hold".into()]);
    }
    api.create(&PostParams::default(), &cm)
        .await
        .expect("child created")
}

async fn gone(api: &Api<ConfigMap>, name: &str) {
    let api = api.clone();
    let name = name.to_owned();
    eventually(&format!("{name} to be deleted"), WAIT, || {
        let api = api.clone();
        let name = name.clone();
        async move {
            api.get_opt(&name)
                .await
                .expect("get")
                .is_none()
                .then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn finalizers_keep_a_deleted_object_until_they_are_removed() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let mut cm = config_map("held", json!({}));
    cm.metadata.finalizers = Some(vec!["test/hold".into()]);
    api.create(&PostParams::default(), &cm)
        .await
        .expect("created");
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let held = api.get("held").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    let adding = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold", "test/more"]}})),
        )
        .await;
    assert_eq!(
        code(&adding.expect_err("no new finalizers while deleting")),
        422
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
    assert_eq!(code(&api.get("held").await.expect_err("gone")), 404);
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let owner = api
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await
        .expect("owner");
    child(&api, "child", &owner, false, false).await;
    api.delete("owner", &DeleteParams::background())
        .await
        .expect("deleted");
    gone(&api, "child").await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let owner = api
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await
        .expect("owner");
    child(&api, "blocker", &owner, true, true).await;
    api.delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete accepted");
    let api2 = api.clone();
    eventually("the blocking child to be marked deleted", WAIT, || {
        let api = api2.clone();
        async move {
            api.get("blocker")
                .await
                .ok()?
                .metadata
                .deletion_timestamp
                .map(|_| ())
        }
    })
    .await;
    let owner = api.get("owner").await.expect("owner waits");
    assert!(
        owner
            .finalizers()
            .contains(&"foregroundDeletion".to_owned())
    );
    api.patch(
        "blocker",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("child released");
    gone(&api, "owner").await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_owner_reference() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let owner = api
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await
        .expect("owner");
    child(&api, "orphan", &owner, false, false).await;
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    api.delete("owner", &params).await.expect("deleted");
    gone(&api, "owner").await;
    let orphan = api.get("orphan").await.expect("orphan kept");
    assert!(orphan.owner_references().is_empty());
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_contents() {
    let t = TestSandbox::start().await;
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "doomed"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "doomed");
    api.create(&PostParams::default(), &config_map("inside", json!({})))
        .await
        .expect("created");
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let namespaces2 = namespaces.clone();
    eventually("the namespace to disappear", WAIT, || {
        let namespaces = namespaces2.clone();
        async move {
            namespaces
                .get_opt("doomed")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert!(api.get_opt("inside").await.expect("get").is_none());
}

#[tokio::test]
async fn a_terminating_namespace_refuses_new_content() {
    let t = TestSandbox::start().await;
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "closing"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "closing");
    let mut held = config_map("held", json!({}));
    held.metadata.finalizers = Some(vec!["test/hold".into()]);
    api.create(&PostParams::default(), &held)
        .await
        .expect("created");
    namespaces
        .delete("closing", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let terminating = namespaces.get("closing").await.expect("still there");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let refused = api
        .create(&PostParams::default(), &config_map("late", json!({})))
        .await;
    assert_eq!(code(&refused.expect_err("terminating")), 403);
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("released");
    let namespaces2 = namespaces.clone();
    eventually("the namespace to disappear", WAIT, || {
        let namespaces = namespaces2.clone();
        async move {
            namespaces
                .get_opt("closing")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn pods_on_a_node_wait_for_their_kubelet_and_others_go_at_once() {
    use k8s_openapi::api::core::v1::Pod;
    let t = TestSandbox::start().await;
    let api: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod = |name: &str, node: Option<&str>| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 45,
                     "containers": [{"name": "c", "image": "postgres:16"}]}
        }))
        .expect("pod")
    };
    api.create(&PostParams::default(), &pod("unbound", None))
        .await
        .expect("created");
    api.delete("unbound", &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(
        api.get_opt("unbound").await.expect("get").is_none(),
        "an unbound pod goes at once"
    );
    api.create(&PostParams::default(), &pod("bound", Some("sandbox")))
        .await
        .expect("created");
    api.delete("bound", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let terminating = api.get("bound").await.expect("waits for its kubelet");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(45));
    // The kubelet's status write does not remove it; its final delete does.
    api.patch_status(
        "bound",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .expect("status written");
    assert!(api.get_opt("bound").await.expect("get").is_some());
    api.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .expect("final delete");
    assert!(api.get_opt("bound").await.expect("get").is_none());
}
