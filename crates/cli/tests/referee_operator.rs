//! The operator as the install runs it, on a real kube-apiserver (v1.36,
//! with kube-controller-manager and kube-scheduler, from the shared
//! Kubernetes folder): `deploy/install.yaml` applied, `tusk operator`
//! authenticated with a token of its own ServiceAccount, so the installed
//! RBAC is what kube-apiserver enforces. A cluster is declared; with no
//! node to run its pod, the operator must still create every child, write
//! status and events, report the scheduler's refusal, expose `-rw` as a
//! declared load balancer, and never be denied a request. Its requests
//! are counted from kube-apiserver's audit log, not from the operator's
//! own figures: once converged it writes nothing.
//!
//! Where the shared folder is absent the test says so and returns.

// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::Api;
use referee::OPERATOR;
use tusk_api::v1alpha1::{PostgresCluster, SchedulingReason};
use tusk_sandbox::testing::eventually;
use tusk_sandbox::testing::kube_up::{AuditEvent, Components, KubeUp};

const LIMIT: Duration = Duration::from_secs(120);

fn kubectl(up: &KubeUp, args: &[&str]) -> String {
    referee::kubectl(up, args, LIMIT)
}

/// `tusk operator`, stopped when dropped.
struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the operator with a kubeconfig holding a token of its
/// ServiceAccount, as the Deployment's pod would have.
fn start_operator(up: &KubeUp, scratch: &Path) -> Operator {
    let token = kubectl(
        up,
        &[
            "-n",
            "tusk-system",
            "create",
            "token",
            "tusk-operator",
            "--duration=2h",
        ],
    );
    let kubeconfig = scratch.join("operator.kubeconfig");
    let ca = up.dir.path().join("k8s/pki/ca.crt");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster: {{server: \"{}\", certificate-authority: {}}}\n\
             users:\n- name: operator\n  user: {{token: \"{}\"}}\ncontexts:\n- name: k\n  context: {{cluster: k, user: operator}}\n\
             current-context: k\n",
            up.server,
            ca.display(),
            token.trim()
        ),
    )
    .expect("the operator's kubeconfig is written");
    let log = std::fs::File::create(scratch.join("operator.log")).expect("the operator's log");
    let child = Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args(["operator", "--http-address", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", "tusk-system")
        .env("POD_NAME", "tusk-operator-referee")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("the log file"))
        .stderr(log)
        .spawn()
        .expect("tusk operator starts");
    Operator(child)
}

fn operator_requests(up: &KubeUp) -> Vec<AuditEvent> {
    up.audit()
        .into_iter()
        .filter(|e| e.user.username == OPERATOR)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_installed_operator_runs_a_cluster_on_kube_apiserver_under_its_own_rbac() {
    let Some(up) = KubeUp::start(Components {
        controller_manager: true,
        scheduler: true,
        audit: true,
    }) else {
        return;
    };
    let scratch = tempfile::tempdir().expect("a scratch directory");
    referee::install(&up, LIMIT);
    // The operator runs here as a process, not as the Deployment's pods
    // (no node runs them), so nothing serves the admission webhook's
    // Service and every PostgresCluster write would be refused
    // (failurePolicy: Fail). The webhook on kube-apiserver is
    // referee_webhook's and referee_parity's to check.
    kubectl(
        &up,
        &["delete", "validatingwebhookconfiguration", "tusk-operator"],
    );
    let _operator = start_operator(&up, scratch.path());
    kubectl(
        &up,
        &["apply", "--server-side", "-f", "deploy/examples/small.yaml"],
    );

    let client = up.client().await;
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), "default");
    let message = eventually(
        "the operator to report that the scheduler found no node",
        LIMIT,
        || {
            let clusters = clusters.clone();
            async move {
                let status = clusters.get("small").await.ok()?.status?;
                let instance = status.instances.iter().find(|i| i.unscheduled.is_some())?;
                let unscheduled = instance.unscheduled.clone()?;
                (unscheduled.reason == SchedulingReason::Unschedulable)
                    .then_some(unscheduled.message)
            }
        },
    )
    .await;
    assert!(
        message.contains("no nodes available"),
        "the scheduler's words: {message}"
    );
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    for name in ["small-rw", "small-ro", "small-r"] {
        services
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("Service {name}: {e}"));
    }
    // Exposure as declared: kube-apiserver takes the -rw Service as a load
    // balancer (allocating its node port) with the declared annotation and
    // source range, and the instances' ServiceAccount carries the
    // workload identity's annotation.
    let patch = serde_json::json!({"spec": {
        "services": {"rw": {
            "type": "LoadBalancer",
            "annotations": {"example.com/load-balancer": "internal"},
            "loadBalancerSourceRanges": ["10.0.0.0/8"]}},
        "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "backup@p.iam.gserviceaccount.com"}}
    }});
    clusters
        .patch(
            "small",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .expect("kube-apiserver accepts the declared exposure");
    let exposed = eventually("small-rw as a load balancer", LIMIT, || {
        let services = services.clone();
        async move {
            let service = services.get("small-rw").await.ok()?;
            let spec = service.spec.clone()?;
            (spec.type_.as_deref() == Some("LoadBalancer")).then_some(service)
        }
    })
    .await;
    let spec = exposed.spec.clone().expect("a spec");
    assert_eq!(
        spec.load_balancer_source_ranges,
        Some(vec!["10.0.0.0/8".to_owned()])
    );
    assert!(
        spec.ports
            .unwrap_or_default()
            .iter()
            .all(|p| p.node_port.is_some()),
        "kube-apiserver allocated a node port"
    );
    assert_eq!(
        exposed
            .metadata
            .annotations
            .unwrap_or_default()
            .get("example.com/load-balancer")
            .map(String::as_str),
        Some("internal")
    );
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "default");
    eventually("the workload identity on small-instance", LIMIT, || {
        let accounts = accounts.clone();
        async move {
            let account = accounts.get("small-instance").await.ok()?;
            account
                .metadata
                .annotations?
                .contains_key("iam.gke.io/gcp-service-account")
                .then_some(())
        }
    })
    .await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for name in [
        "small-superuser",
        "small-app",
        "small-replication",
        "small-ca",
        "small-server",
    ] {
        secrets
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("Secret {name}: {e}"));
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    claims
        .get("small-1")
        .await
        .expect("the instance's volume claim");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.get("small-1").await.expect("the instance's pod");
    let events = kubectl(&up, &["get", "events", "-n", "default", "-o", "name"]);
    assert!(!events.is_empty(), "the operator records events");

    let denied: Vec<String> = operator_requests(&up)
        .iter()
        .filter(|e| e.response_status.as_ref().is_some_and(|s| s.code == 403))
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(
        denied.is_empty(),
        "requests of the operator kube-apiserver denied: {denied:#?}"
    );

    // Converged: nothing more to write while nothing changes, but the
    // renewals of the leader Lease, which are leadership, not reconciling.
    let reconcile_write = |e: &&AuditEvent| e.is_write() && !e.request_uri.contains("/leases/");
    let writes = |events: &[AuditEvent]| events.iter().filter(reconcile_write).count();
    let before = operator_requests(&up);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let after = operator_requests(&up);
    let new: Vec<String> = after[before.len().min(after.len())..]
        .iter()
        .filter(reconcile_write)
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    eprintln!(
        "operator on kube-apiserver: {} requests ({} writes besides its Lease) to converge, {} requests in 20 s converged",
        before.len(),
        writes(&before),
        after.len() - before.len()
    );
    assert!(new.is_empty(), "writes once converged: {new:#?}");
}
