//! What every controller test shares: a sandbox with Tusk's CRDs, an
//! operator running in this process, and reads of what it wrote.

pub use k8s_openapi::api::coordination::v1::Lease;
pub use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
pub use k8s_openapi::api::policy::v1::PodDisruptionBudget;
pub use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
pub use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
pub use kube::{Client, ResourceExt};
pub use serde_json::json;
pub use std::future::Future;
pub use std::time::Duration;
pub use tokio::sync::watch;
pub use tokio::task::JoinHandle;
pub use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster};
pub use tusk_operator::controller::Options;
pub use tusk_operator::leader::LeaseTiming;
pub use tusk_operator::run::{Leadership, Settings, run};
pub use tusk_sandbox::Failure;
pub use tusk_sandbox::testing::{self, TestSandbox};

pub const NS: &str = "default";

pub const WAIT: Duration = Duration::from_secs(30);

pub async fn sandbox(with_cel: bool) -> TestSandbox {
    sandbox_with(if with_cel { |_| {} } else { strip_cel }).await
}

/// A sandbox whose CRDs `adjust` changed before they were installed.
pub async fn sandbox_with(adjust: fn(&mut CustomResourceDefinition)) -> TestSandbox {
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
pub fn strip_cel(crd: &mut CustomResourceDefinition) {
    let mut value = serde_json::to_value(&*crd).expect("serializes");
    pub fn walk(v: &mut serde_json::Value) {
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
pub fn admit_any_spec(crd: &mut CustomResourceDefinition) {
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

pub struct Operator {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Operator {
    pub fn start(client: &Client, leadership: Option<Leadership>) -> Self {
        Self::start_with_http(client, leadership, None)
    }

    pub fn start_with_http(
        client: &Client,
        leadership: Option<Leadership>,
        http: Option<std::net::SocketAddr>,
    ) -> Self {
        Self::start_with_settings(
            client,
            Settings {
                leadership,
                http_address: http,
                ..Settings::default()
            },
        )
    }

    /// An operator with these settings (two reconciles at once, every
    /// namespace).
    pub fn start_with_settings(client: &Client, settings: Settings) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let settings = Settings {
            options: Options {
                concurrency: 2,
                namespace: None,
            },
            ..settings
        };
        let client = client.clone();
        let task = tokio::spawn(async move {
            if let Err(error) = run(client, settings, stop_rx).await {
                panic!("operator failed: {error}");
            }
        });
        Self { stop, task }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the operator stops in time")
            .expect("the operator task ends cleanly");
    }
}

pub async fn wait_for<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    testing::wait_for(what, WAIT, check).await;
}

pub fn cluster(name: &str, spec: serde_json::Value) -> PostgresCluster {
    serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .expect("a cluster")
}

pub fn small() -> serde_json::Value {
    json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}})
}

pub async fn create(client: &Client, name: &str, spec: serde_json::Value) -> PostgresCluster {
    let api: Api<PostgresCluster> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &cluster(name, spec))
        .await
        .expect("cluster created")
}

pub async fn get<K>(client: &Client, name: &str) -> Option<K>
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

pub async fn status_phase(client: &Client, name: &str) -> Option<ClusterPhase> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .and_then(|s| s.phase)
}

pub async fn children_exist(client: &Client, name: &str) -> bool {
    for suffix in [
        "superuser",
        "app",
        "replication",
        "ca",
        "ca-key",
        "server",
        "replication-cert",
    ] {
        if get::<Secret>(client, &format!("{name}-{suffix}"))
            .await
            .is_none()
        {
            return false;
        }
    }
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

pub fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address")
}

/// Successful reconciles so far, from the operator's own metrics.
pub async fn reconciles(metrics: std::net::SocketAddr) -> u64 {
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

pub async fn condition(
    client: &Client,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    get::<PostgresCluster>(client, name)
        .await?
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason, c.message))
}

pub async fn requested_storage(client: &Client, name: &str) -> Option<String> {
    get::<PersistentVolumeClaim>(client, name)
        .await?
        .spec?
        .resources?
        .requests?
        .get("storage")
        .map(|q| q.0.clone())
}

pub async fn events_of(client: &Client, name: &str) -> Vec<(String, String)> {
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

pub async fn instances_of(client: &Client, name: &str) -> Vec<tusk_api::v1alpha1::InstanceStatus> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .map(|s| s.instances)
        .unwrap_or_default()
}

/// A histogram's `_count` or `_sum` from the operator's own metrics.
pub async fn histogram(metrics: std::net::SocketAddr, series: &str) -> f64 {
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

pub async fn observed_generation(client: &Client, name: &str) -> Option<i64> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .and_then(|s| s.observed_generation)
}
