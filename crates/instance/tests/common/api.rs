//! The sandbox API server as the instance manager's tests use it: an
//! admin client, Tusk's CRDs, and pods that exist only as API objects
//! with the pod IP a test gives them.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tusk_sandbox::Sandbox;

/// A running sandbox API server in a new temporary directory (kept while
/// the returned handle lives), and an admin client of it.
pub async fn api_server() -> (tempfile::TempDir, Sandbox, Client) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let sandbox = Sandbox::start(tusk_sandbox::Config::new(dir.path()))
        .await
        .expect("API server starts");
    let client = client_for(&sandbox).await;
    (dir, sandbox, client)
}

/// An admin client of `sandbox`.
pub async fn client_for(sandbox: &Sandbox) -> Client {
    let kubeconfig = Kubeconfig::read_from(sandbox.kubeconfig_path()).expect("kubeconfig reads");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    Client::try_from(config).expect("client builds")
}

/// Creates Tusk's CRDs.
pub async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in tusk_api::crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD created");
    }
}

/// Creates pod `name` in `default` and gives it `ip`.
pub async fn pod_with_ip(client: &Client, name: &str, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "postgres", "image": "postgres:15"}]},
    }))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    set_pod_ip(client, name, ip).await;
}

/// Sets the pod IP of pod `name` in `default`.
pub async fn set_pod_ip(client: &Client, name: &str, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"podIP": ip}})),
    )
    .await
    .expect("pod status patched");
}
