//! Node loss: the kubelet stops reporting and the node lifecycle
//! controller reacts as Kubernetes' does, with short timings: the node
//! turns Unknown after the grace period and is tainted unreachable, its
//! pods turn not ready, and a pod whose toleration of the taint runs out
//! is evicted while one with the default 300 s stays; when the node is
//! back, everything recovers and the eviction completes.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::Api;
use serde_json::{Value, json};
use support::{Node, SHELL, WAIT, condition, eventually, pod_json};
use tusk_sandbox::controllers::node_lifecycle::NodeLifecycleConfig;
use tusk_sandbox::kubelet::Processes;

const NS: &str = "default";

fn sleeper(name: &str, tolerations: Option<Value>) -> Value {
    let mut pod = json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": SHELL, "command": ["sleep", "600"]}]
        }
    });
    if let Some(tolerations) = tolerations {
        pod["spec"]["tolerations"] = tolerations;
    }
    pod
}

/// The state of a process (`R`, `S`, `T` for stopped ...), from /proc.
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

async fn node_json(nodes: &Api<NodeObject>) -> Option<Value> {
    let node = nodes.get_opt("sandbox").await.ok()??;
    serde_json::to_value(node).ok()
}

fn taints(node: &Value) -> Vec<(String, String)> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let text = |f: &str| t[f].as_str().unwrap_or_default().to_owned();
            (text("key"), text("effect"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_turns_unknown_its_pods_not_ready_and_short_tolerations_evict() {
    let node = Node::start_with_lifecycle(NodeLifecycleConfig {
        grace_period: Duration::from_secs(3),
        monitor_period: Duration::from_millis(300),
    })
    .await;
    let short = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                        "effect": "NoExecute", "tolerationSeconds": 3}]);
    node.create_pod(NS, sleeper("brief", Some(short))).await;
    node.create_pod(NS, sleeper("patient", None)).await;
    let pods = node.pods(NS);
    for name in ["brief", "patient"] {
        eventually("the pods to be ready", WAIT, || async {
            let pod = pod_json(&pods, name).await?;
            (condition(&pod, "Ready").as_deref() == Some("True")).then_some(())
        })
        .await;
    }
    let faults = node.faults();
    let pid = faults.pid(NS, "patient", "main").expect("running");
    faults.lose_node(Processes::Freeze);
    eventually("the processes to freeze with the node", WAIT, || async {
        (process_state(pid) == Some('T')).then_some(())
    })
    .await;

    let nodes: Api<NodeObject> = Api::all(node.client.clone());
    let lost = eventually("the node to turn Unknown", WAIT, || async {
        let node = node_json(&nodes).await?;
        (condition(&node, "Ready").as_deref() == Some("Unknown")).then_some(node)
    })
    .await;
    let ready = &lost["status"]["conditions"][0];
    assert_eq!(ready["reason"], "NodeStatusUnknown", "{lost}");
    let tainted = eventually("the unreachable taints", WAIT, || async {
        let node = node_json(&nodes).await?;
        let taints = taints(&node);
        (taints.len() == 2).then_some(taints)
    })
    .await;
    assert!(tainted.contains(&("node.kubernetes.io/unreachable".into(), "NoExecute".into())));
    assert!(tainted.contains(&("node.kubernetes.io/unreachable".into(), "NoSchedule".into())));
    eventually("the patient pod to be marked not ready", WAIT, || async {
        let pod = pod_json(&pods, "patient").await?;
        (condition(&pod, "Ready").as_deref() == Some("False")).then_some(())
    })
    .await;
    let evicted = eventually("the brief pod to be evicted", WAIT, || async {
        let pod = pod_json(&pods, "brief").await?;
        pod["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(pod)
    })
    .await;
    assert_eq!(
        condition(&evicted, "DisruptionTarget").as_deref(),
        Some("True")
    );
    assert_eq!(
        condition(&evicted, "Ready").as_deref(),
        Some("False"),
        "{evicted}"
    );
    // Nobody finishes the deletion while the node is away.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        pod_json(&pods, "brief").await.is_some(),
        "stays Terminating"
    );
    let patient = pod_json(&pods, "patient").await.expect("patient pod");
    assert!(
        patient["metadata"]["deletionTimestamp"].is_null(),
        "300 s not yet over"
    );

    faults.restore_node();
    eventually("the node to be Ready again, untainted", WAIT, || async {
        let node = node_json(&nodes).await?;
        let ready = condition(&node, "Ready").as_deref() == Some("True");
        (ready && taints(&node).is_empty()).then_some(())
    })
    .await;
    eventually("the evicted pod to be gone", WAIT, || async {
        pod_json(&pods, "brief").await.is_none().then_some(())
    })
    .await;
    eventually("the patient pod to be ready again", WAIT, || async {
        let pod = pod_json(&pods, "patient").await?;
        (condition(&pod, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    eventually("the processes to thaw with the node", WAIT, || async {
        (process_state(pid) != Some('T')).then_some(())
    })
    .await;
    assert_eq!(
        faults.pid(NS, "patient", "main"),
        Some(pid),
        "not restarted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lost_with_its_processes_killed_restarts_them_once_back() {
    let node = Node::start().await;
    node.create_pod(NS, sleeper("worker", None)).await;
    let faults = node.faults();
    let first = eventually("the container to start", WAIT, || async {
        faults.pid(NS, "worker", "main")
    })
    .await;
    faults.lose_node(Processes::Kill);
    eventually("the process to die", WAIT, || async {
        (!support::alive(first)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        faults.pid(NS, "worker", "main"),
        None,
        "a lost node restarts nothing"
    );
    faults.restore_node();
    let pods = node.pods(NS);
    eventually("the container to run again", WAIT, || async {
        let pod = pod_json(&pods, "worker").await?;
        let main = &pod["status"]["containerStatuses"][0];
        (main["restartCount"] == 1 && main["state"]["running"].is_object()).then_some(())
    })
    .await;
}

/// Injects a fault over HTTP, within [`WAIT`].
async fn inject(
    client: &kube::Client,
    fault: &tusk_sandbox::fault_client::Fault,
) -> Result<String, kube::Error> {
    tokio::time::timeout(WAIT, tusk_sandbox::fault_client::inject(client, fault))
        .await
        .expect("the fault request is answered in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_reach_the_node_through_the_api_server() {
    use tusk_sandbox::fault_client::{Fault, PodRef};
    let node = Node::start().await;
    node.create_pod(NS, sleeper("worker", None)).await;
    let faults = node.faults();
    let pid = eventually("the container to start", WAIT, || async {
        faults.pid(NS, "worker", "main")
    })
    .await;
    let worker = PodRef {
        namespace: NS.into(),
        name: "worker".into(),
    };
    inject(&node.client, &Fault::Freeze(worker.clone(), None))
        .await
        .expect("freeze");
    eventually("the first container to freeze", WAIT, || async {
        (process_state(pid) == Some('T')).then_some(())
    })
    .await;
    inject(
        &node.client,
        &Fault::Thaw(worker.clone(), Some("main".into())),
    )
    .await
    .expect("thaw");
    eventually("the container to thaw", WAIT, || async {
        (process_state(pid) != Some('T')).then_some(())
    })
    .await;
    let cut = Fault::CutService(
        worker.clone(),
        tusk_sandbox::node::proxy::cuts::Direction::Ingress,
    );
    inject(&node.client, &cut).await.expect("cut");
    assert_eq!(
        faults.service_cuts().of(NS, "worker"),
        Some(tusk_sandbox::node::proxy::cuts::Direction::Ingress)
    );
    inject(&node.client, &Fault::HealService(worker.clone()))
        .await
        .expect("heal");
    assert_eq!(faults.service_cuts().of(NS, "worker"), None);

    let lose = Fault::LoseNode {
        node: "sandbox".into(),
        processes: Processes::Keep,
    };
    inject(&node.client, &lose).await.expect("lose the node");
    let partitions = node.api_faults().partitions().clone();
    assert!(faults.node_lost() && partitions.node_cut("sandbox"));
    let restore = Fault::RestoreNode {
        node: "sandbox".into(),
    };
    inject(&node.client, &restore)
        .await
        .expect("restore the node");
    assert!(!faults.node_lost() && !partitions.node_cut("sandbox"));

    let ghost = PodRef {
        namespace: NS.into(),
        name: "ghost".into(),
    };
    let missing = inject(&node.client, &Fault::CutApi(ghost)).await;
    assert!(
        matches!(&missing, Err(kube::Error::Api(e)) if e.code == 404),
        "{missing:?}"
    );
}
