//! Pods reach the API server as their ServiceAccount, the way in-cluster
//! programs do on Kubernetes: a bound token, the CA and the namespace at
//! /var/run/secrets/kubernetes.io/serviceaccount, and the `kubernetes`
//! Service's address in their environment.

#[path = "kubelet_support/mod.rs"]
mod support;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use kube::core::DynamicObject;
use serde_json::json;
use support::{Node, SHELL, WAIT, eventually, pod_json};

const NS: &str = "default";

/// The token directory, spelled so that path translation cannot rewrite
/// it: the program must find it through its mount namespace.
const DIR: &str = "d=/var/run/secrets/kubernetes.io/service\"account\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_finds_its_token_ca_and_namespace_at_the_fixed_path() {
    let node = Node::start().await;
    let script = format!(
        "{DIR}; cat $d/namespace; echo; cmp -s $d/ca.crt \"$CA\" && echo ca; \
         test -s $d/token && echo token; \
         echo \"$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT $KUBERNETES_SERVICE_PORT_HTTPS\"; \
         echo \"${{KUBECONFIG:-none}}\"; exec sleep 600"
    );
    let ca = node.dir.path().join("ca.crt");
    let pod = node
        .create_pod(
            NS,
            json!({
                "metadata": {"name": "reader"},
                "spec": {"containers": [{
                    "name": "main", "image": SHELL, "command": ["/bin/sh", "-c", script],
                    "env": [{"name": "CA", "value": ca.display().to_string()}]
                }]}
            }),
        )
        .await;
    let services: Api<Service> = Api::namespaced(node.client.clone(), NS);
    let ip = services
        .get("kubernetes")
        .await
        .expect("the kubernetes Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("cluster IP");
    let log = node.log(&pod, "main", 0);
    let expected = format!("default\nca\ntoken\n{ip}:443 443\nnone\n");
    let output = eventually("the pod's output", WAIT, || async {
        let output = support::log_text(&log)?;
        output.ends_with("none\n").then_some(output)
    })
    .await;
    assert_eq!(output, expected);
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(
        !mountinfo.contains("kubernetes.io/serviceaccount"),
        "the host does not see the pod's mount"
    );
}

/// A Role and RoleBinding letting `default` read ConfigMaps in `default`,
/// so the in-cluster request below is allowed once RBAC is enforced.
async fn grant_configmap_reads(node: &Node) {
    let rbac = |kind: &str, plural: &str| {
        let gvk = kube::core::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind);
        let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, plural);
        (
            Api::<DynamicObject>::namespaced_with(node.client.clone(), NS, &resource),
            resource,
        )
    };
    let (roles, role_resource) = rbac("Role", "roles");
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "read-configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
    let role: DynamicObject = serde_json::from_value(role).expect("role");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let (bindings, _) = rbac("RoleBinding", "rolebindings");
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-configmaps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NS}]});
    let binding: DynamicObject = serde_json::from_value(binding).expect("binding");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    drop(role_resource);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_in_a_pod_reaches_the_api_through_the_kubernetes_service() {
    let Ok(kubectl) = which_kubectl() else {
        panic!("kubectl is needed on PATH for this test");
    };
    let node = Node::start().await;
    grant_configmap_reads(&node).await;
    // The first tries wait (at most 10 s) for the Service's route, which
    // the node's proxy may set up after the pod started, as kube-proxy may.
    let script = format!(
        "echo \"server: $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT\"; \
         for try in 1 2 3 4 5 6 7 8 9 10; do \
           {kubectl} get configmap kube-root-ca.crt -o name >/dev/null 2>&1 && break; sleep 1; done; \
         {kubectl} get secrets -o name 2>&1 | grep -o 'system:serviceaccount:default:default\" cannot list'; \
         {kubectl} get configmap kube-root-ca.crt -o name; echo \"exit $?\"; exec sleep 600"
    );
    let pod = node
        .create_pod(NS, json!({
            "metadata": {"name": "client"},
            "spec": {"containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c", script]}]}
        }))
        .await;
    let log = node.log(&pod, "main", 0);
    let output = eventually("kubectl's answer", WAIT, || async {
        let output = support::log_text(&log)?;
        output.contains("exit ").then_some(output)
    })
    .await;
    assert!(
        output.contains("configmap/kube-root-ca.crt\nexit 0\n"),
        "kubectl used the in-cluster configuration: {output}"
    );
    assert!(
        output.contains("system:serviceaccount:default:default\" cannot list"),
        "as the pod's ServiceAccount, which may not list Secrets: {output}"
    );
    let pods = node.pods(NS);
    let status = pod_json(&pods, "client").await.expect("pod");
    assert_eq!(status["spec"]["serviceAccountName"], "default");
}

fn which_kubectl() -> Result<String, ()> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
        .map(|p| p.display().to_string())
        .ok_or(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_without_a_token_mount_runs_without_a_namespace_of_its_own() {
    let node = Node::start().await;
    let script = format!("{DIR}; test -e $d/token && echo token || echo no-token; exec sleep 600");
    let pod = node
        .create_pod(NS, json!({
            "metadata": {"name": "plain"},
            "spec": {"automountServiceAccountToken": false,
                "containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c", script]}]}
        }))
        .await;
    let log = node.log(&pod, "main", 0);
    let output = eventually("the pod's output", WAIT, || async {
        let output = support::log_text(&log)?;
        output.ends_with('\n').then_some(output)
    })
    .await;
    assert_eq!(output, "no-token\n");
}

/// The pod's log after `from` bytes, once it holds `line`.
async fn log_line_after(log: &std::path::Path, from: usize, line: &str) -> usize {
    eventually(&format!("{line:?} in the pod's log"), WAIT, || async {
        let output = support::log_text(log)?;
        let found = output.get(from..)?.find(&format!("{line}\n"))?;
        Some(from + found + line.len() + 1)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cut_off_from_the_api_server_gets_no_answer_until_healed() {
    let Ok(kubectl) = which_kubectl() else {
        panic!("kubectl is needed on PATH for this test");
    };
    let node = Node::start().await;
    grant_configmap_reads(&node).await;
    let script = format!(
        "while true; do \
           if {kubectl} get configmap kube-root-ca.crt -o name --request-timeout=1s >/dev/null 2>&1; \
           then echo answered; else echo unanswered; fi; sleep 0.2; \
         done"
    );
    let pod = node
        .create_pod(NS, json!({
            "metadata": {"name": "client"},
            "spec": {"containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c", script]}]}
        }))
        .await;
    let log = node.log(&pod, "main", 0);
    let seen = log_line_after(&log, 0, "answered").await;
    let partitions = node.api_faults().partitions().clone();
    partitions.cut_pod(NS, "client");
    // A request already under way may still be answered; the next is not.
    let cut = log_line_after(&log, seen, "unanswered").await;
    let admin: Api<Service> = Api::namespaced(node.client.clone(), NS);
    admin.get("kubernetes").await.expect("others are served");
    partitions.heal_pod(NS, "client");
    log_line_after(&log, cut, "answered").await;
}
