//! The controller against a real API server (the sandbox's, without a
//! kubelet), like envtest: children and ownership, zero-write convergence,
//! drift repair, permanent and transient errors, leader election, deletion
//! policies and restarts (R7-R16).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster};
use tusk_operator::controller::Options;
use tusk_operator::leader::LeaseTiming;
use tusk_operator::run::{Leadership, Settings, run};
use tusk_sandbox::Failure;
use tusk_sandbox::testing::{self, TestSandbox};

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(30);

async fn sandbox(with_cel: bool) -> TestSandbox {
    sandbox_with(if with_cel { |_| {} } else { strip_cel }).await
}

/// A sandbox whose CRDs `adjust` changed before they were installed.
async fn sandbox_with(adjust: fn(&mut CustomResourceDefinition)) -> TestSandbox {
    let sandbox = TestSandbox::start().await;
    let crds = tusk_api::crds().into_iter().map(|mut crd| {
        adjust(&mut crd);
        crd
    });
    testing::install_crds(&sandbox.client, crds).await;
    sandbox
}

/// An "older CRD" without CEL rules, so a spec that admission would refuse
/// reaches the controller, which must still refuse it.
fn strip_cel(crd: &mut CustomResourceDefinition) {
    let mut value = serde_json::to_value(&*crd).expect("serializes");
    fn walk(v: &mut serde_json::Value) {
        if let Some(map) = v.as_object_mut() {
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(walk);
        } else if let Some(list) = v.as_array_mut() {
            list.iter_mut().for_each(walk);
        }
    }
    walk(&mut value);
    *crd = serde_json::from_value(value).expect("deserializes");
}

/// A CRD that admits any spec, so an object this operator cannot decode
/// can be stored (as one written under another schema would be).
fn admit_any_spec(crd: &mut CustomResourceDefinition) {
    strip_cel(crd);
    if crd.spec.names.kind != "PostgresCluster" {
        return;
    }
    let mut value = serde_json::to_value(&*crd).expect("serializes");
    if let Some(versions) = value["spec"]["versions"].as_array_mut() {
        for version in versions {
            version["schema"]["openAPIV3Schema"]["properties"]["spec"] =
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        }
    }
    *crd = serde_json::from_value(value).expect("deserializes");
}

struct Operator {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Operator {
    fn start(client: &Client, leadership: Option<Leadership>) -> Self {
        Self::start_with_http(client, leadership, None)
    }

    fn start_with_http(
        client: &Client,
        leadership: Option<Leadership>,
        http: Option<std::net::SocketAddr>,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let settings = Settings {
            options: Options {
                concurrency: 2,
                namespace: None,
            },
            leadership,
            http_address: http,
            ..Settings::default()
        };
        let client = client.clone();
        let task = tokio::spawn(async move {
            if let Err(error) = run(client, settings, stop_rx).await {
                panic!("operator failed: {error}");
            }
        });
        Self { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the operator stops in time")
            .expect("the operator task ends cleanly");
    }
}

async fn wait_for<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    testing::wait_for(what, WAIT, check).await;
}

fn cluster(name: &str, spec: serde_json::Value) -> PostgresCluster {
    serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .expect("a cluster")
}

fn small() -> serde_json::Value {
    json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}})
}

async fn create(client: &Client, name: &str, spec: serde_json::Value) -> PostgresCluster {
    let api: Api<PostgresCluster> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &cluster(name, spec))
        .await
        .expect("cluster created")
}

async fn get<K>(client: &Client, name: &str) -> Option<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

async fn status_phase(client: &Client, name: &str) -> Option<ClusterPhase> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .and_then(|s| s.phase)
}

async fn children_exist(client: &Client, name: &str) -> bool {
    get::<Pod>(client, &format!("{name}-1")).await.is_some()
        && get::<PersistentVolumeClaim>(client, &format!("{name}-1"))
            .await
            .is_some()
        && get::<Service>(client, &format!("{name}-rw"))
            .await
            .is_some()
        && get::<Service>(client, &format!("{name}-ro"))
            .await
            .is_some()
        && get::<Service>(client, &format!("{name}-r")).await.is_some()
        && get::<Secret>(client, &format!("{name}-superuser"))
            .await
            .is_some()
        && get::<Secret>(client, &format!("{name}-app"))
            .await
            .is_some()
        && get::<Secret>(client, &format!("{name}-replication"))
            .await
            .is_some()
        && get::<ServiceAccount>(client, &format!("{name}-instance"))
            .await
            .is_some()
        && get::<Role>(client, &format!("{name}-instance"))
            .await
            .is_some()
        && get::<RoleBinding>(client, &format!("{name}-instance"))
            .await
            .is_some()
        && get::<PodDisruptionBudget>(client, &format!("{name}-primary"))
            .await
            .is_some()
}

#[tokio::test]
async fn children_are_created_with_owner_references_and_status_is_reported() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let created = create(&h.client, "orders", small()).await;
    wait_for("every child", || children_exist(&h.client, "orders")).await;

    let uid = created.uid().expect("uid");
    let pod: Pod = get(&h.client, "orders-1").await.expect("pod");
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("PostgresCluster", uid.as_str(), Some(true))
    );
    let secret: Secret = get(&h.client, "orders-app").await.expect("secret");
    assert_eq!(secret.owner_references()[0].uid, uid);

    wait_for("the Provisioning phase", || async {
        status_phase(&h.client, "orders").await == Some(ClusterPhase::Provisioning)
    })
    .await;
    let live: PostgresCluster = get(&h.client, "orders").await.expect("cluster");
    let status = live.status.clone().expect("status");
    assert_eq!(status.target_primary.as_deref(), Some("orders-1"));
    assert_eq!(status.latest_instance_serial, 1);
    assert_eq!(status.observed_generation, live.metadata.generation);
    assert!(
        live.finalizers()
            .iter()
            .any(|f| f == "postgres.tusk.dev/cleanup")
    );
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    for expected in ["Ready", "Progressing", "Degraded"] {
        assert!(types.contains(&expected), "{types:?}");
    }
    operator.stop().await;
}

fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address")
}

/// Successful reconciles so far, from the operator's own metrics.
async fn reconciles(metrics: std::net::SocketAddr) -> u64 {
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|line| line.strip_prefix("tusk_operator_reconciles_total{result=\"success\"} "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_converged_reconcile_makes_no_writes() {
    let h = sandbox(true).await;
    let metrics = free_port();
    let operator = Operator::start_with_http(&h.client, None, Some(metrics));
    create(&h.client, "steady", small()).await;
    wait_for("every child", || children_exist(&h.client, "steady")).await;
    wait_for("status", || async {
        status_phase(&h.client, "steady").await.is_some()
    })
    .await;
    // Let the first reconciles settle, then watch more than one requeue
    // period (10 s while provisioning).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes_before = h.sandbox.faults().writes();
    let requests_before = h.sandbox.faults().count("*", "*");
    let reconciles_before = reconciles(metrics).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let reconciled = reconciles(metrics).await - reconciles_before;
    assert!(
        reconciled >= 1,
        "the controller must have reconciled meanwhile"
    );
    assert_eq!(
        h.sandbox.faults().writes() - writes_before,
        0,
        "writes: {:?}",
        h.sandbox.faults().counts()
    );
    let requests = h.sandbox.faults().count("*", "*") - requests_before;
    // Children come from watch caches: a converged reconcile asks the API nothing.
    assert_eq!(
        requests, 0,
        "{requests} API requests for {reconciled} converged reconciles"
    );
    operator.stop().await;
}

#[tokio::test]
async fn edited_and_deleted_children_are_restored() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "drift", small()).await;
    wait_for("every child", || children_exist(&h.client, "drift")).await;

    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    let edit =
        json!({"spec": {"selector": {"tusk.dev/cluster": "drift", "tusk.dev/role": "replica"}}});
    services
        .patch("drift-rw", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit");
    services
        .delete("drift-ro", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the -rw selector restored and -ro recreated", || async {
        let rw = get::<Service>(&h.client, "drift-rw").await;
        let role = rw
            .and_then(|s| s.spec)
            .and_then(|s| s.selector)
            .and_then(|s| s.get("tusk.dev/role").cloned());
        role.as_deref() == Some("primary") && get::<Service>(&h.client, "drift-ro").await.is_some()
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn an_invalid_spec_degrades_the_cluster_without_a_hot_loop() {
    // Without CEL in the CRD, the controller is the last line of defence.
    let h = sandbox(false).await;
    let operator = Operator::start(&h.client, None);
    let mut spec = small();
    spec["postgres"]["parameters"] = json!({"wal_level": "minimal"});
    create(&h.client, "bad", spec).await;
    wait_for("Degraded", || async {
        status_phase(&h.client, "bad").await == Some(ClusterPhase::Degraded)
    })
    .await;
    let live: PostgresCluster = get(&h.client, "bad").await.expect("cluster");
    let degraded = live
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Degraded")
        .expect("Degraded condition");
    assert_eq!(degraded.status, "True");
    assert_eq!(degraded.reason, "InvalidSpec");
    assert!(
        degraded.message.contains("spec.postgres.parameters"),
        "{}",
        degraded.message
    );
    assert!(
        degraded.message.contains("wal_level"),
        "{}",
        degraded.message
    );
    assert!(
        get::<Pod>(&h.client, "bad-1").await.is_none(),
        "nothing is built from an invalid spec"
    );

    let before: u64 = h.sandbox.faults().count("*", "*");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests = h.sandbox.faults().count("*", "*") - before;
    assert!(
        requests <= 10,
        "a permanent error must not loop: {requests} requests in 5 s"
    );
    operator.stop().await;
}

#[tokio::test]
async fn api_errors_are_retried_with_back_off_and_the_cluster_recovers() {
    let h = sandbox(true).await;
    let faults = h.sandbox.faults().clone();
    faults.fail_next(3, "patch", "services", Failure::Internal);
    faults.fail_next(
        2,
        "create",
        "secrets",
        Failure::TooManyRequests {
            retry_after_seconds: 1,
        },
    );
    let operator = Operator::start(&h.client, None);
    create(&h.client, "flaky", small()).await;
    wait_for("every child despite injected errors", || {
        children_exist(&h.client, "flaky")
    })
    .await;
    let reconciles_with_errors = faults.count("list", "pods");
    assert!(
        reconciles_with_errors <= 30,
        "back-off must bound retries: {reconciles_with_errors} reconciles"
    );
    operator.stop().await;
}

#[tokio::test]
async fn two_operators_elect_one_leader_and_the_other_takes_over() {
    let h = sandbox(true).await;
    let leadership = |identity: &str| Leadership {
        namespace: NS.to_owned(),
        identity: identity.to_owned(),
        timing: LeaseTiming {
            duration_seconds: 3,
            grace_seconds: 1,
        },
    };
    let first = Operator::start(&h.client, Some(leadership("first")));
    let second = Operator::start(&h.client, Some(leadership("second")));
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), NS);
    let holder = || async {
        leases
            .get_opt(tusk_operator::leader::LEASE_NAME)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
    };
    wait_for("a leader", || async { holder().await.is_some() }).await;
    let leader = holder().await.expect("leader");
    create(&h.client, "ha", small()).await;
    wait_for("the leader to reconcile", || {
        children_exist(&h.client, "ha")
    })
    .await;

    let (leader_op, follower) = if leader == "first" {
        (first, second)
    } else {
        (second, first)
    };
    leader_op.stop().await;
    wait_for("the other replica to take the Lease", || async {
        holder().await.is_some_and(|h| h != leader)
    })
    .await;
    // The new leader reconciles: a deleted child comes back.
    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    services
        .delete("ha-r", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the new leader to restore -r", || async {
        get::<Service>(&h.client, "ha-r").await.is_some()
    })
    .await;
    follower.stop().await;
}

#[tokio::test]
async fn deletion_with_retain_keeps_the_volume_and_delete_removes_it() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "keep", small()).await;
    let mut spec = small();
    spec["deletionPolicy"] = json!("Delete");
    create(&h.client, "drop", spec).await;
    wait_for("children of both", || async {
        children_exist(&h.client, "keep").await && children_exist(&h.client, "drop").await
    })
    .await;
    wait_for("finalizers", || async {
        let has = |c: Option<PostgresCluster>| c.is_some_and(|c| !c.finalizers().is_empty());
        has(get(&h.client, "keep").await) && has(get(&h.client, "drop").await)
    })
    .await;

    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .delete("keep", &DeleteParams::default())
        .await
        .expect("delete keep");
    clusters
        .delete("drop", &DeleteParams::default())
        .await
        .expect("delete drop");
    wait_for("both clusters gone", || async {
        get::<PostgresCluster>(&h.client, "keep").await.is_none()
            && get::<PostgresCluster>(&h.client, "drop").await.is_none()
    })
    .await;
    wait_for(
        "the Delete volume collected and the Retain one kept",
        || async {
            get::<PersistentVolumeClaim>(&h.client, "drop-1")
                .await
                .is_none()
                && get::<PersistentVolumeClaim>(&h.client, "keep-1")
                    .await
                    .is_some()
        },
    )
    .await;
    let kept: PersistentVolumeClaim = get(&h.client, "keep-1").await.expect("kept");
    assert!(
        kept.owner_references().is_empty(),
        "a retained volume is detached from its cluster"
    );
    assert_eq!(
        kept.labels().get("tusk.dev/retained").map(String::as_str),
        Some("true")
    );
    wait_for("the pods collected", || async {
        get::<Pod>(&h.client, "keep-1").await.is_none()
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn a_restarted_operator_resumes_without_duplicates() {
    let h = sandbox(true).await;
    let first = Operator::start(&h.client, None);
    let mut spec = small();
    spec["instances"] = json!(3);
    create(&h.client, "resume", spec).await;
    wait_for("the first instance", || async {
        get::<Pod>(&h.client, "resume-1").await.is_some()
    })
    .await;
    first.stop().await;
    let second = Operator::start(&h.client, None);
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_for("status after the restart", || async {
        status_phase(&h.client, "resume").await.is_some()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), NS);
    let names: Vec<String> = pods
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    // The first instance is not ready (no kubelet), so no replica may exist yet.
    assert_eq!(names, ["resume-1"]);
    let live: PostgresCluster = get(&h.client, "resume").await.expect("cluster");
    assert_eq!(live.status.expect("status").latest_instance_serial, 1);
    second.stop().await;
}

#[tokio::test]
async fn a_cluster_that_does_not_decode_is_reported_and_does_not_stop_the_others() {
    let h = sandbox_with(admit_any_spec).await;
    let resource = kube::api::ApiResource::erase::<PostgresCluster>(&());
    let dynamic: Api<kube::api::DynamicObject> =
        Api::namespaced_with(h.client.clone(), NS, &resource);
    let mut broken = kube::api::DynamicObject::new("broken", &resource).within(NS);
    broken.data = json!({"spec": {"instances": "three", "storage": {"size": "1Gi"}}});
    dynamic
        .create(&PostParams::default(), &broken)
        .await
        .expect("stored under the loose schema");
    let operator = Operator::start(&h.client, None);
    create(&h.client, "fine", small()).await;
    wait_for("the valid cluster's children", || {
        children_exist(&h.client, "fine")
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.client.clone(), NS);
    wait_for("an event on the undecodable cluster", || async {
        events.list(&Default::default()).await.is_ok_and(|list| {
            list.items.iter().any(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken")
                    && e.reason.as_deref() == Some("InvalidSpec")
                    && e.note.as_deref().is_some_and(|n| n.contains("cannot read"))
            })
        })
    })
    .await;
    assert!(get::<Pod>(&h.client, "broken-1").await.is_none());
    operator.stop().await;
}

async fn condition(client: &Client, name: &str, type_: &str) -> Option<(String, String, String)> {
    get::<PostgresCluster>(client, name)
        .await?
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason, c.message))
}

async fn requested_storage(client: &Client, name: &str) -> Option<String> {
    get::<PersistentVolumeClaim>(client, name)
        .await?
        .spec?
        .resources?
        .requests?
        .get("storage")
        .map(|q| q.0.clone())
}

async fn events_of(client: &Client, name: &str) -> Vec<(String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    events
        .list(&Default::default())
        .await
        .map(|list| {
            list.items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn storage_grows_and_a_shrink_is_refused_even_past_admission() {
    // R26. Without CEL in the CRD, a shrink reaches the controller.
    let h = sandbox(false).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "disk", small()).await;
    wait_for("the volume", || async {
        requested_storage(&h.client, "disk-1").await.is_some()
    })
    .await;
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    let size = |s: &str| json!({"spec": {"storage": {"size": s}}});
    clusters
        .patch("disk", &PatchParams::default(), &Patch::Merge(&size("2Gi")))
        .await
        .expect("grow");
    wait_for("the volume to grow", || async {
        requested_storage(&h.client, "disk-1").await.as_deref() == Some("2Gi")
    })
    .await;
    clusters
        .patch(
            "disk",
            &PatchParams::default(),
            &Patch::Merge(&size("1536Mi")),
        )
        .await
        .expect("a shrink the old CRD admits");
    wait_for("the refusal in Degraded", || async {
        condition(&h.client, "disk", "Degraded")
            .await
            .is_some_and(|(status, reason, message)| {
                status == "True" && reason == "RefusedChange" && message.contains("never shrink")
            })
    })
    .await;
    assert_eq!(
        requested_storage(&h.client, "disk-1").await.as_deref(),
        Some("2Gi"),
        "the volume keeps its size"
    );
    wait_for("a RefusedChange event", || async {
        events_of(&h.client, "disk")
            .await
            .iter()
            .any(|(reason, note)| reason == "RefusedChange" && note.contains("disk-1"))
    })
    .await;
    assert!(
        events_of(&h.client, "disk")
            .await
            .iter()
            .any(|(reason, _)| reason == "PhaseChanged"),
        "phase transitions are events too"
    );
    operator.stop().await;
}

#[tokio::test]
async fn credentials_are_generated_once_and_never_overwritten() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "creds", small()).await;
    wait_for("every child", || children_exist(&h.client, "creds")).await;
    let password = |secret: Secret| {
        secret
            .data
            .and_then(|d| d.get("password").cloned())
            .map(|p| p.0)
    };
    let generated =
        password(get(&h.client, "creds-app").await.expect("secret")).expect("a password");
    assert!(generated.len() >= 32, "a strong generated password");
    // A person rotates the password; later reconciles leave it alone.
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let rotated = json!({"stringData": {"password": "rotated-by-a-person"}});
    secrets
        .patch(
            "creds-app",
            &PatchParams::default(),
            &Patch::Merge(&rotated),
        )
        .await
        .expect("rotate");
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"instances": 2}})),
        )
        .await
        .expect("a spec change, so the cluster is reconciled again");
    wait_for("the change observed", || async {
        get::<PostgresCluster>(&h.client, "creds")
            .await
            .and_then(|c| c.status)
            .and_then(|s| s.observed_generation)
            == Some(2)
    })
    .await;
    let now = password(get(&h.client, "creds-app").await.expect("secret"));
    assert_eq!(now.as_deref(), Some(b"rotated-by-a-person".as_slice()));
    operator.stop().await;
}

async fn instances_of(client: &Client, name: &str) -> Vec<tusk_api::v1alpha1::InstanceStatus> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .map(|s| s.instances)
        .unwrap_or_default()
}

#[tokio::test]
async fn an_invalid_edit_keeps_the_observed_instances_in_status() {
    // Without CEL in the CRD, an invalid edit reaches the controller.
    let h = sandbox(false).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "kept", small()).await;
    wait_for("the instance in status", || async {
        instances_of(&h.client, "kept")
            .await
            .iter()
            .any(|i| i.name == "kept-1")
    })
    .await;
    // The last position and synchronous state the instance reported, as
    // the operator recorded them: what a later failover decides on.
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    let mut status = get::<PostgresCluster>(&h.client, "kept")
        .await
        .and_then(|c| c.status)
        .expect("status");
    for instance in &mut status.instances {
        instance.timeline = Some(1);
        instance.lsn = Some("0/3000060".to_owned());
        instance.sync_state = Some("sync".to_owned());
    }
    let recorded = json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "status": status,
    });
    clusters
        .patch_status(
            "kept",
            &PatchParams::apply("tusk-operator").force(),
            &Patch::Apply(&recorded),
        )
        .await
        .expect("status written");
    let mut invalid = small();
    invalid["postgres"]["parameters"] = json!({"wal_level": "minimal"});
    clusters
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": invalid})),
        )
        .await
        .expect("an edit the old CRD admits");
    wait_for("the invalid spec reported", || async {
        condition(&h.client, "kept", "Degraded")
            .await
            .is_some_and(|(status, reason, _)| status == "True" && reason == "InvalidSpec")
    })
    .await;
    let instances = instances_of(&h.client, "kept").await;
    let kept = instances.iter().find(|i| i.name == "kept-1");
    assert_eq!(
        kept.map(|i| (i.lsn.as_deref(), i.timeline, i.sync_state.as_deref())),
        Some((Some("0/3000060"), Some(1), Some("sync"))),
        "the observed instances stay in status: {instances:?}"
    );
    operator.stop().await;
}

/// A histogram's `_count` or `_sum` from the operator's own metrics.
async fn histogram(metrics: std::net::SocketAddr, series: &str) -> f64 {
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn observed_generation(client: &Client, name: &str) -> Option<i64> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .and_then(|s| s.observed_generation)
}

#[tokio::test]
async fn every_spec_change_is_timed_until_status_observes_it() {
    let h = sandbox(true).await;
    let metrics = free_port();
    let operator = Operator::start_with_http(&h.client, None, Some(metrics));
    let count = "tusk_operator_generation_observed_seconds_count";
    create(&h.client, "timed", small()).await;
    wait_for("the first generation timed", || async {
        observed_generation(&h.client, "timed").await == Some(1)
            && histogram(metrics, count).await == 1.0
    })
    .await;
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    for (generation, instances) in [(2, 2), (3, 1)] {
        clusters
            .patch(
                "timed",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"instances": instances}})),
            )
            .await
            .expect("a spec change");
        wait_for("the spec change timed", || async {
            observed_generation(&h.client, "timed").await == Some(generation)
                && histogram(metrics, count).await == generation as f64
        })
        .await;
    }
    let seconds = histogram(metrics, "tusk_operator_generation_observed_seconds_sum").await;
    assert!(
        (0.0..30.0).contains(&seconds),
        "three changes observed within the test: {seconds} s"
    );
    operator.stop().await;
}
