//! Deployments and ReplicaSets with the kubelet: a Deployment's pods run,
//! `kubectl rollout status` and `kubectl scale` work, a changed template
//! rolls pods over (RollingUpdate and Recreate), a lost pod is replaced and
//! deleting the Deployment takes its ReplicaSets and pods along.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{Node, SHELL, WAIT, eventually};

const NS: &str = "default";

fn kubectl(node: &Node, args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", node.dir.path().join("kubeconfig"))
        .env("HOME", node.dir.path())
        .env("KUBECACHEDIR", node.dir.path().join("cache"))
        .output()
        .expect("kubectl runs")
}

fn deployment(name: &str, replicas: i32, version: &str, strategy: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "strategy": strategy,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                    "name": "main", "image": SHELL,
                    "command": ["/bin/sh", "-c", format!("echo {version}; exec sleep 600")]
                }]}
            }
        }
    }))
    .expect("deployment")
}

async fn create(node: &Node, object: &Deployment) -> Api<Deployment> {
    let api: Api<Deployment> = Api::namespaced(node.client.clone(), NS);
    api.create(&PostParams::default(), object)
        .await
        .expect("deployment created");
    api
}

/// The running, not-deleted pods with `app=<name>`.
async fn running_pods(node: &Node, name: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), NS);
    let list = pods
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .expect("pods list");
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect()
}

fn rollout_status(node: &Node, name: &str) {
    let target = format!("deployment/{name}");
    let output = kubectl(node, &["rollout", "status", &target, "--timeout=60s"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("successfully rolled out"),
        "kubectl rollout status: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn owner(object: &impl ResourceExt) -> (String, String, bool) {
    let reference = object
        .owner_references()
        .first()
        .cloned()
        .expect("an owner reference");
    (
        reference.kind,
        reference.name,
        reference.controller == Some(true),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_rolls_out_and_kubectl_follows_it() {
    let node = Node::start().await;
    create(&node, &deployment("web", 1, "v1", json!({}))).await;
    rollout_status(&node, "web");
    let sets: Api<ReplicaSet> = Api::namespaced(node.client.clone(), NS);
    let set = sets
        .list(&ListParams::default())
        .await
        .expect("sets")
        .items
        .pop()
        .expect("a ReplicaSet");
    let hash = set
        .labels()
        .get("pod-template-hash")
        .cloned()
        .expect("hash label");
    assert_eq!(set.name_any(), format!("web-{hash}"));
    assert_eq!(owner(&set), ("Deployment".into(), "web".into(), true));
    let pods = running_pods(&node, "web").await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    assert_eq!(pod.labels().get("pod-template-hash"), Some(&hash));
    let suffix = pod
        .name_any()
        .strip_prefix(&format!("web-{hash}-"))
        .map(str::len);
    assert_eq!(suffix, Some(5), "{}", pod.name_any());
    assert_eq!(owner(pod), ("ReplicaSet".into(), set.name_any(), true));
    let table = kubectl(&node, &["get", "deploy", "web", "--no-headers"]);
    let line = String::from_utf8_lossy(&table.stdout)
        .split_whitespace()
        .take(4)
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(line, "web 1/1 1 1");
    // kubectl scale writes the scale subresource.
    let scaled = kubectl(&node, &["scale", "deployment/web", "--replicas=2"]);
    assert!(
        scaled.status.success(),
        "{}",
        String::from_utf8_lossy(&scaled.stderr)
    );
    rollout_status(&node, "web");
    assert_eq!(running_pods(&node, "web").await.len(), 2);
}

/// The pods with `app=<name>`, terminating ones included.
async fn all_pods(node: &Node, name: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), NS);
    let selector = ListParams::default().labels(&format!("app={name}"));
    pods.list(&selector)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Rolls `db` from v1 to v2 and returns whether an old and a new pod ever
/// existed at once.
async fn roll_over(strategy: Value) -> bool {
    let node = Node::start().await;
    let api = create(&node, &deployment("db", 2, "v1", strategy.clone())).await;
    rollout_status(&node, "db");
    let before: Vec<String> = running_pods(&node, "db")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let changed = deployment("db", 2, "v2", strategy);
    let patch = json!({"spec": {"template": changed.spec.expect("spec").template}});
    api.patch("db", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("template changed");
    let overlapped = AtomicBool::new(false);
    let after = eventually("the old pods to go", WAIT, || async {
        let existing = all_pods(&node, "db").await;
        let old = existing.iter().any(|p| before.contains(&p.name_any()));
        let new = existing.iter().any(|p| !before.contains(&p.name_any()));
        if old && new {
            overlapped.store(true, Ordering::SeqCst);
        }
        let pods = running_pods(&node, "db").await;
        (!old && pods.len() == 2).then_some(pods)
    })
    .await;
    rollout_status(&node, "db");
    let sets: Api<ReplicaSet> = Api::namespaced(node.client.clone(), NS);
    let sets = sets.list(&ListParams::default()).await.expect("sets").items;
    assert_eq!(
        sets.len(),
        2,
        "the old ReplicaSet stays, scaled down, as revision history"
    );
    let hash = after[0]
        .labels()
        .get("pod-template-hash")
        .cloned()
        .expect("hash");
    for set in sets {
        let current = set.name_any() == format!("db-{hash}");
        let replicas = set.spec.and_then(|s| s.replicas);
        assert_eq!(
            replicas,
            Some(if current { 2 } else { 0 }),
            "{}",
            set.metadata.name.unwrap_or_default()
        );
    }
    let deployment = api.get("db").await.expect("deployment");
    assert_eq!(
        deployment
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    overlapped.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_template_rolls_pods_over_one_by_one() {
    let overlapped = roll_over(
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
    )
    .await;
    assert!(
        overlapped,
        "with maxUnavailable 0, new pods start before old ones go"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_template_recreates_pods() {
    let overlapped = roll_over(json!({"type": "Recreate"})).await;
    assert!(
        !overlapped,
        "Recreate starts new pods only once the old ones are gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_pod_is_replaced_and_deleting_the_deployment_cascades() {
    let node = Node::start().await;
    let api = create(&node, &deployment("cache", 1, "v1", json!({}))).await;
    rollout_status(&node, "cache");
    let first = running_pods(&node, "cache")
        .await
        .pop()
        .expect("a pod")
        .name_any();
    let pods: Api<Pod> = Api::namespaced(node.client.clone(), NS);
    pods.delete(&first, &DeleteParams::default())
        .await
        .expect("pod deleted");
    eventually("a replacement pod", WAIT, || async {
        let pods = running_pods(&node, "cache").await;
        (pods.len() == 1 && pods[0].name_any() != first).then_some(())
    })
    .await;
    api.delete("cache", &DeleteParams::default())
        .await
        .expect("deployment deleted");
    let sets: Api<ReplicaSet> = Api::namespaced(node.client.clone(), NS);
    eventually("the ReplicaSet and pods to go", WAIT, || async {
        let sets = sets.list(&ListParams::default()).await.ok()?.items;
        let pods = pods
            .list(&ListParams::default().labels("app=cache"))
            .await
            .ok()?
            .items;
        (sets.is_empty() && pods.is_empty()).then_some(())
    })
    .await;
}
