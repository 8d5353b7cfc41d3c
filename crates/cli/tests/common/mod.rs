//! The full sandbox (API server, kubelet, Service proxy) with the operator
//! in process, for end-to-end tests with real PostgreSQL. The operator
//! runs as its ServiceAccount `tusk-system/tusk-operator` under the
//! ClusterRole and leader-election Role of deploy/install.yaml, so every
//! test also exercises those permissions.

#![allow(dead_code)]

pub mod checks;
pub mod runtime;
pub mod story;
pub mod tls;
pub mod writer;

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::Client;
use kube::api::Api;
use runtime::Runtime;
use tokio::sync::watch;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster, PostgresClusterStatus};
use tusk_operator::config::OperatorConfig;
use tusk_operator::run::{Settings, run};
use tusk_sandbox::Sandbox;
use tusk_sandbox::node::Node;
use tusk_sandbox::testing;

pub const NS: &str = "default";

/// The spec of a three-instance cluster that loses no acknowledged
/// commit in a failover: `ANY 1` synchronous replication and
/// `dataDurability: required`, replaced after `delay_seconds`.
pub fn durable_cluster(delay_seconds: u64) -> serde_json::Value {
    serde_json::json!({"instances": 3,
           "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
           "storage": {"size": "1Gi"},
           "replication": {"synchronous": {"mode": "any", "number": 1}},
           "failover": {"delaySeconds": delay_seconds, "dataDurability": "required"}})
}

/// A Kubernetes API server the tests' helpers work against: the sandbox's
/// [`World`], or a real control plane (the referee tests').
pub trait ApiServer {
    /// A client with the administrator's rights.
    fn kube(&self) -> &Client;
    /// The administrator's kubeconfig, for the `tusk` command.
    fn kubeconfig_path(&self) -> std::path::PathBuf;
}

impl ApiServer for World {
    fn kube(&self) -> &Client {
        &self.client
    }

    fn kubeconfig_path(&self) -> std::path::PathBuf {
        self.kubeconfig()
    }
}

pub async fn wait_for<F, Fut>(what: &str, limit: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    testing::wait_for(what, limit, check).await;
}

pub struct World {
    pub client: Client,
    pub node: Option<Node>,
    stop: watch::Sender<bool>,
    operator: tokio::task::JoinHandle<()>,
    operator_client: Client,
    operator_config: OperatorConfig,
    /// The Docker runtime whose containers and network go with the test.
    docker: Option<std::sync::Arc<tusk_sandbox::kubelet::docker::DockerRuntime>>,
    _sandbox: Sandbox,
    pub dir: tempfile::TempDir,
}

/// Applies the operator's namespace, ServiceAccount and RBAC from the
/// install objects and returns a client authenticated as that
/// ServiceAccount.
async fn operator_client(sandbox: &Sandbox, admin: &Client) -> Client {
    let identity = tusk_operator::install::identity_manifests().expect("install objects");
    tusk_sandbox::converge::apply(admin, &identity)
        .await
        .expect("the operator's identity and RBAC apply");
    testing::client_for_service_account(
        sandbox,
        tusk_operator::install::NAMESPACE,
        tusk_operator::install::NAME,
    )
    .await
}

fn spawn_operator(
    client: Client,
    config: OperatorConfig,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (stop, stop_rx) = watch::channel(false);
    let settings = Settings {
        config,
        ..Settings::default()
    };
    let operator = tokio::spawn(async move {
        if let Err(error) = run(client, settings, stop_rx).await {
            panic!("operator failed: {error}");
        }
    });
    (stop, operator)
}

impl Drop for World {
    fn drop(&mut self) {
        // A failed test still leaves nothing behind on the engine.
        if let Some(docker) = &self.docker {
            docker.clean_blocking();
        }
    }
}

impl World {
    /// Starts the sandbox and the operator. With RUST_LOG set, their logs
    /// go to the test's output (e.g. `RUST_LOG=tusk_operator=info` shows
    /// the operator's decisions in time). With TUSK_KEEP_TEST_DIR set, the
    /// sandbox's directory (pod logs, volumes) is kept and its path printed.
    /// On the runtime `TUSK_E2E_RUNTIME` names (`process`, the default, or
    /// `docker`), so the whole suite can run on either.
    pub async fn start() -> Self {
        Self::start_on(Runtime::from_env()).await
    }

    /// As [`World::start`], with pods run by `runtime`.
    pub async fn start_on(runtime: Runtime) -> Self {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
        }
        let mut dir = runtime::test_dir(runtime);
        if std::env::var_os("TUSK_KEEP_TEST_DIR").is_some() {
            dir.disable_cleanup(true);
            println!("sandbox directory kept: {}", dir.path().display());
        }
        let (sandbox, client) = testing::serve(dir.path(), |config| config).await;
        testing::install_tusk_crds(&client).await;
        let (node, config, docker) = runtime::start_node(
            runtime,
            client.clone(),
            dir.path(),
            sandbox.kubeconfig_path(),
        )
        .await;
        let operator_client = operator_client(&sandbox, &client).await;
        let (stop, operator) = spawn_operator(operator_client.clone(), config.clone());
        Self {
            client,
            node: Some(node),
            stop,
            operator,
            operator_client,
            operator_config: config,
            docker,
            _sandbox: sandbox,
            dir,
        }
    }

    /// Kills the operator (its task is dropped wherever it is, as SIGKILL
    /// would stop the process) and starts a new one.
    pub async fn restart_operator(&mut self) {
        self.operator.abort();
        let _ = (&mut self.operator).await;
        let (stop, operator) =
            spawn_operator(self.operator_client.clone(), self.operator_config.clone());
        self.stop = stop;
        self.operator = operator;
    }

    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(30), &mut self.operator).await;
        if let Some(node) = self.node.take() {
            node.shutdown().await;
        }
        if let Some(docker) = &self.docker {
            docker.clean().await;
        }
    }

    pub fn clusters(&self) -> Api<PostgresCluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn phase_and_ready(&self, name: &str) -> (Option<ClusterPhase>, i32) {
        let cluster = self.clusters().get_opt(name).await.ok().flatten();
        let status = cluster.and_then(|c| c.status).unwrap_or_default();
        (status.phase, status.ready_instances)
    }

    pub async fn wait_ready(&self, name: &str, instances: i32) {
        wait_for(
            &format!("{name} Ready with {instances} instances"),
            Duration::from_secs(240),
            || async { self.phase_and_ready(name).await == (Some(ClusterPhase::Ready), instances) },
        )
        .await;
    }

    pub async fn service_ip(&self, name: &str) -> String {
        let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
        services
            .get(name)
            .await
            .expect("service")
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("cluster IP")
    }

    /// libpq connection settings for `service` as the application owner.
    pub async fn conninfo(&self, service: &str, cluster: &str) -> String {
        let host = self.service_ip(service).await;
        self.conninfo_at(&host, cluster).await
    }

    /// libpq connection settings for `host` as the application owner.
    pub async fn conninfo_at(&self, host: &str, cluster: &str) -> String {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        let secret = secrets
            .get(&format!("{cluster}-app"))
            .await
            .expect("app secret");
        let field = |key: &str| {
            let data = secret.data.clone().unwrap_or_default();
            String::from_utf8(data.get(key).expect("key").0.clone()).expect("UTF-8")
        };
        format!(
            "host={host} port=5432 user={} password={} dbname=app connect_timeout=3",
            field("username"),
            field("password")
        )
    }

    /// Creates the PostgresCluster `name` with `spec`.
    pub async fn create_cluster(&self, name: &str, spec: serde_json::Value) {
        let cluster: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        }))
        .expect("a cluster");
        self.clusters()
            .create(&kube::api::PostParams::default(), &cluster)
            .await
            .expect("created");
    }

    /// Pods and nodes cut off from the API server (sandbox faults).
    pub fn partitions(&self) -> &tusk_sandbox::apiserver::partitions::Partitions {
        self._sandbox.faults().partitions()
    }

    /// The cluster's status (default while it has none).
    pub async fn status(&self, name: &str) -> PostgresClusterStatus {
        self.clusters()
            .get(name)
            .await
            .expect("cluster")
            .status
            .unwrap_or_default()
    }

    /// Waits until all `instances` are ready and every standby confirms
    /// commits (`sync` or `quorum`), so the primary's synchronous set is
    /// on record.
    pub async fn wait_replicating(&self, cluster: &str, instances: i32) {
        wait_for(
            &format!("{instances} ready instances of {cluster}, every standby synchronous"),
            Duration::from_secs(180),
            || async {
                let s = self.status(cluster).await;
                let synchronous = s
                    .instances
                    .iter()
                    .filter(|i| {
                        i.role == "replica"
                            && matches!(i.sync_state.as_deref(), Some("quorum" | "sync"))
                    })
                    .count();
                s.ready_instances == instances
                    && s.current_primary.is_some()
                    && s.current_primary == s.target_primary
                    && i32::try_from(synchronous).is_ok_and(|n| n == instances - 1)
            },
        )
        .await;
    }

    /// The kubeconfig `kubectl` and `tusk promote` use.
    /// The settings the operator runs with.
    pub fn operator_config(&self) -> &OperatorConfig {
        &self.operator_config
    }

    pub fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Restarts of every container of `cluster`'s pods, by pod.
    pub async fn restarts(&self, cluster: &str) -> Vec<(String, i32)> {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), NS);
        let selector = tusk_api::labels::cluster_selector(cluster);
        let list = pods
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .expect("pods");
        let mut counts: Vec<(String, i32)> = list
            .items
            .iter()
            .map(|pod| {
                let total = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .map_or(0, |all| all.iter().map(|c| c.restart_count).sum());
                (pod.metadata.name.clone().unwrap_or_default(), total)
            })
            .collect();
        counts.sort();
        counts
    }

    pub async fn connect(&self, service: &str, cluster: &str) -> tokio_postgres::Client {
        let config = self.conninfo(service, cluster).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match tokio_postgres::connect(&config, tls::encrypted()).await {
                Ok((client, connection)) => {
                    tokio::spawn(connection);
                    return client;
                }
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => panic!("cannot connect through {service}: {error}"),
            }
        }
    }
}

pub async fn count_rows(world: &World, service: &str, cluster: &str) -> i64 {
    let client = world.connect(service, cluster).await;
    client
        .query_one("select count(*) from orders", &[])
        .await
        .map(|row| row.get::<_, i64>(0))
        .unwrap_or(-1)
}

pub async fn pod_ip(world: &World, name: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    pods.get(name).await.ok()?.status?.pod_ip
}

/// Waits until `name` is back as a ready standby, and meanwhile tries to
/// write on it directly (not through `-rw`): every try must fail.
pub async fn rejoins_without_accepting_a_write(world: &World, cluster: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut tries = 0;
    loop {
        if let Some(ip) = pod_ip(world, name).await {
            let conninfo = world.conninfo_at(&ip, cluster).await;
            if let Ok(Ok((client, connection))) = tokio::time::timeout(
                Duration::from_secs(3),
                tokio_postgres::connect(&conninfo, tls::encrypted()),
            )
            .await
            {
                tokio::spawn(connection);
                tries += 1;
                let write = client.execute("insert into ledger (id) values (-1)", &[]);
                let outcome = tokio::time::timeout(Duration::from_secs(3), write).await;
                assert!(
                    !matches!(outcome, Ok(Ok(_))),
                    "the former primary {name} accepted a write"
                );
            }
        }
        let s = world.status(cluster).await;
        let back = s
            .instances
            .iter()
            .any(|i| i.name == name && i.role == "replica" && i.ready);
        if back && s.ready_instances == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not rejoin as a standby: {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    println!("{name} rejoined as a standby; {tries} direct writes on it were refused");
}

/// The numbers a benchmark was given after its name (`cargo bench --bench
/// failover -- 10 5`); `cargo bench` also passes `--bench`, and whatever is
/// not a number is skipped.
pub fn bench_numbers() -> Vec<u64> {
    std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect()
}
