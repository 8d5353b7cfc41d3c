//! kubectl's `get` tables for nodes and pods, with the columns and cell
//! values kube-apiserver prints, `-o wide` included.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::TestSandbox;
use crate::kubectl::succeed;

fn columns(header: &str) -> Vec<&str> {
    header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

fn row<'t>(table: &'t str, name: &str) -> Vec<&'t str> {
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row {name} in {table}"));
    columns(line)
}

async fn node_with_status(t: &TestSandbox) {
    let nodes: Api<Node> = Api::all(t.client.clone());
    let node = serde_json::from_value(json!({
        "metadata": {"name": "db-node", "labels": {"node-role.kubernetes.io/database": ""}},
        "spec": {},
    }))
    .expect("a Node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("created");
    let status = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.9"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian", "kernelVersion": "6.12",
            "containerRuntimeVersion": "sandbox://processes", "architecture": "amd64",
            "operatingSystem": "linux", "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
    }});
    nodes
        .patch_status("db-node", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_nodes_shows_status_roles_and_wide_node_info() {
    let t = TestSandbox::start().await;
    node_with_status(&t).await;
    let ready = succeed(&t, &["get", "nodes"]);
    assert_eq!(row(&ready, "db-node")[1], "Ready", "{ready}");
    // kubectl cordon reads the Node through its typed client, in protobuf.
    let cordoned = succeed(&t, &["cordon", "db-node"]);
    assert!(cordoned.contains("node/db-node cordoned"), "{cordoned}");
    let table = succeed(&t, &["get", "nodes"]);
    let header = table.lines().next().unwrap_or_default();
    assert_eq!(
        columns(header),
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{table}"
    );
    let cells = row(&table, "db-node");
    assert_eq!(
        cells[..3],
        ["db-node", "Ready,SchedulingDisabled", "database"],
        "{table}"
    );
    assert_eq!(cells[4], "v1.33.0", "{table}");
    let wide = succeed(&t, &["get", "nodes", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    assert!(
        header
            .ends_with("INTERNAL-IP   EXTERNAL-IP   OS-IMAGE   KERNEL-VERSION   CONTAINER-RUNTIME"),
        "{wide}"
    );
    assert_eq!(
        row(&wide, "db-node")[5..],
        [
            "127.0.0.9",
            "<none>",
            "Debian",
            "6.12",
            "sandbox://processes"
        ],
        "{wide}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_wide_shows_status_restarts_ip_and_node() {
    let t = TestSandbox::start().await;
    let pods: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "crashing"},
        "spec": {"nodeName": "db-node", "containers": [{"name": "pg", "image": "postgres:17"}]},
    }))
    .expect("a Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let finished = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Running",
        "podIP": "10.1.0.7",
        "podIPs": [{"ip": "10.1.0.7"}],
        "containerStatuses": [{"name": "pg", "image": "postgres:17", "imageID": "", "ready": false,
            "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "finishedAt": finished}}}],
    }});
    pods.patch_status("crashing", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status written");
    let wide = succeed(&t, &["get", "pods", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    assert_eq!(
        columns(header),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ],
        "{wide}"
    );
    let cells = row(&wide, "crashing");
    assert_eq!(
        cells[..3],
        ["crashing", "0/1", "CrashLoopBackOff"],
        "{wide}"
    );
    assert!(
        cells[3].starts_with("4 (") && cells[3].ends_with(" ago)"),
        "{wide}"
    );
    assert_eq!(
        cells[5..],
        ["10.1.0.7", "db-node", "<none>", "<none>"],
        "{wide}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_events_shows_last_seen_type_reason_object_and_message() {
    let t = TestSandbox::start().await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(t.client.clone());
    let now = jiff::Timestamp::now().to_string();
    let event = serde_json::from_value(json!({
        "metadata": {"name": "small.1"},
        "involvedObject": {"kind": "PostgresCluster", "name": "small", "namespace": "default"},
        "type": "Warning", "reason": "FailoverBlocked", "message": "no standby is in sync",
        "firstTimestamp": now, "lastTimestamp": now, "count": 3,
        "source": {"component": "tusk-operator"},
    }))
    .expect("an Event");
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("created");
    let table = succeed(&t, &["get", "events"]);
    let header = table.lines().next().unwrap_or_default();
    assert_eq!(
        columns(header),
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{table}"
    );
    let line = table.lines().nth(1).unwrap_or_default();
    let cells = columns(line);
    assert_eq!(
        cells[1..],
        [
            "Warning",
            "FailoverBlocked",
            "postgrescluster/small",
            "no standby is in sync"
        ],
        "{table}"
    );
    let wide = succeed(&t, &["get", "events", "-o", "wide"]);
    let cells = columns(wide.lines().nth(1).unwrap_or_default());
    assert_eq!(cells[cells.len() - 2..], ["3", "small.1"], "{wide}");
}
