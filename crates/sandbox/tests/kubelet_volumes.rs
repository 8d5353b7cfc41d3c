//! Secret and ConfigMap volumes while a pod runs: the kubelet reads their
//! sources again at its sync period (shortened in these tests) and swaps
//! a changed payload in whole, as Kubernetes' atomic writer does.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Node, SHELL, WAIT, eventually};

const NS: &str = "default";

/// A changed Secret or ConfigMap reaches the running container's volume
/// (the kubelet's sync period, shortened here), swapped in whole behind
/// the same file names; its environment keeps the value it started with,
/// as on Kubernetes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_secret_or_config_map_reaches_the_running_containers_volume() {
    let node = Node::start().await;
    support::create_secret(&node, NS).await;
    let secrets: Api<Secret> = Api::namespaced(node.client.clone(), NS);
    let config_maps: Api<ConfigMap> = Api::namespaced(node.client.clone(), NS);
    let config_map = serde_json::from_value(json!({
        "metadata": {"name": "settings"}, "data": {"mode": "first"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .expect("config map created");
    let pod = node
        .create_pod(NS, json!({
            "metadata": {"name": "reader"},
            "spec": {
                "volumes": [
                    {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
                    {"name": "settings", "configMap": {"name": "settings"}}
                ],
                "containers": [{
                    "name": "main",
                    "image": SHELL,
                    "command": ["/bin/sh", "-c"],
                    "args": ["while true; do echo \"file=$(cat /etc/creds/password) mode=$(cat /etc/settings/mode) env=$PASSWORD\"; sleep 0.2; done"],
                    "env": [
                        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}
                    ],
                    "volumeMounts": [
                        {"name": "creds", "mountPath": "/etc/creds"},
                        {"name": "settings", "mountPath": "/etc/settings"}
                    ]
                }]
            }
        }))
        .await;
    let log = node.log(&pod, "main", 0);
    eventually("the first values", WAIT, || async {
        support::log_text(&log)?
            .contains("file=s3cret mode=first env=s3cret")
            .then_some(())
    })
    .await;

    let patch = json!({"stringData": {"password": "rotated"}});
    secrets
        .patch("creds", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("secret patched");
    let patch = json!({"data": {"mode": "second"}});
    config_maps
        .patch("settings", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("config map patched");
    let changed = Instant::now();
    eventually("the new values in the volumes", WAIT, || async {
        support::log_text(&log)?
            .contains("file=rotated mode=second env=s3cret")
            .then_some(())
    })
    .await;
    println!("volumes refreshed {:?} after the change", changed.elapsed());
    // Every read saw a whole value, never an empty or missing file.
    let text = support::log_text(&log).expect("log");
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert!(
            matches!(
                fields.as_slice(),
                [
                    "file=s3cret" | "file=rotated",
                    "mode=first" | "mode=second",
                    "env=s3cret"
                ]
            ),
            "{line:?}"
        );
    }
}
