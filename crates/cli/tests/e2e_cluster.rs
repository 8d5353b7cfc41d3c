//! End to end on the full sandbox (API server, kubelet, Service proxy) with
//! real PostgreSQL and the operator in process: a declared cluster becomes
//! a replicated database reachable through its Services, scales down and
//! up, survives a killed replica, and explains itself when it cannot
//! converge (R7-R16, R22, R24).

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster};
use tusk_operator::config::OperatorConfig;
use tusk_operator::run::{Settings, run};
use tusk_sandbox::node::Node;
use tusk_sandbox::server::{Config, Sandbox};

const NS: &str = "default";

async fn wait_for<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("timed out after {limit:?} waiting for {what}");
}

struct World {
    client: Client,
    node: Option<Node>,
    stop: watch::Sender<bool>,
    operator: tokio::task::JoinHandle<()>,
    _sandbox: Sandbox,
    _dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let sandbox = Sandbox::start(Config::new(dir.path()))
            .await
            .expect("sandbox");
        let client = tusk_sandbox::client::from_kubeconfig(sandbox.kubeconfig_path())
            .await
            .expect("client");
        tusk_sandbox::converge::install_crds(&client)
            .await
            .expect("CRDs");
        let node = Node::start(
            client.clone(),
            dir.path(),
            sandbox.kubeconfig_path(),
            env!("CARGO_BIN_EXE_tusk").into(),
        )
        .expect("node");
        let mut config = OperatorConfig::default();
        if let Some((uid, gid)) = tusk_sandbox::kubelet::postgres_identity() {
            config.postgres_uid = i64::from(uid);
            config.postgres_gid = i64::from(gid);
        }
        let (stop, stop_rx) = watch::channel(false);
        let settings = Settings {
            config,
            ..Settings::default()
        };
        let operator_client = client.clone();
        let operator = tokio::spawn(async move {
            if let Err(error) = run(operator_client, settings, stop_rx).await {
                panic!("operator failed: {error}");
            }
        });
        Self {
            client,
            node: Some(node),
            stop,
            operator,
            _sandbox: sandbox,
            _dir: dir,
        }
    }

    async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(30), &mut self.operator).await;
        if let Some(node) = self.node.take() {
            node.shutdown().await;
        }
    }

    fn clusters(&self) -> Api<PostgresCluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn phase_and_ready(&self, name: &str) -> (Option<ClusterPhase>, i32) {
        let cluster = self.clusters().get_opt(name).await.ok().flatten();
        let status = cluster.and_then(|c| c.status).unwrap_or_default();
        (status.phase, status.ready_instances)
    }

    async fn wait_ready(&self, name: &str, instances: i32) {
        wait_for(
            &format!("{name} Ready with {instances} instances"),
            Duration::from_secs(240),
            || async { self.phase_and_ready(name).await == (Some(ClusterPhase::Ready), instances) },
        )
        .await;
    }

    async fn service_ip(&self, name: &str) -> String {
        let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
        services
            .get(name)
            .await
            .expect("service")
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("cluster IP")
    }

    async fn connect(&self, service: &str, cluster: &str) -> tokio_postgres::Client {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        let secret = secrets
            .get(&format!("{cluster}-app"))
            .await
            .expect("app secret");
        let field = |key: &str| {
            let data = secret.data.clone().unwrap_or_default();
            String::from_utf8(data.get(key).expect("key").0.clone()).expect("UTF-8")
        };
        let host = self.service_ip(service).await;
        let config = format!(
            "host={host} port=5432 user={} password={} dbname=app connect_timeout=5",
            field("username"),
            field("password")
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match tokio_postgres::connect(&config, tokio_postgres::NoTls).await {
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

async fn count_rows(world: &World, service: &str, cluster: &str) -> i64 {
    let client = world.connect(service, cluster).await;
    client
        .query_one("select count(*) from orders", &[])
        .await
        .map(|row| row.get::<_, i64>(0))
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_cluster_becomes_a_replicated_database_that_scales_and_heals() {
    let world = World::start().await;
    let cluster: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": {"instances": 3, "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                 "storage": {"size": "1Gi"},
                 "failover": {"delaySeconds": 5, "dataDurability": "preferred"}}
    }))
    .expect("cluster");
    world
        .clusters()
        .create(&PostParams::default(), &cluster)
        .await
        .expect("created");
    // A cluster that cannot converge: PostgreSQL 17 is not installed here.
    let stuck: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": "stuck", "namespace": NS},
        "spec": {"instances": 1, "postgres": {"version": 17}, "storage": {"size": "1Gi"}}
    }))
    .expect("cluster");
    world
        .clusters()
        .create(&PostParams::default(), &stuck)
        .await
        .expect("created");
    world.wait_ready("shop", 3).await;
    says_why_it_cannot_converge(&world).await;

    // A row written through -rw is read through -ro (R24).
    let primary = world.connect("shop-rw", "shop").await;
    primary
        .batch_execute("create table orders (id int primary key); insert into orders select generate_series(1, 100)")
        .await
        .expect("write through -rw");
    let in_recovery: bool = primary
        .query_one("select pg_is_in_recovery()", &[])
        .await
        .expect("query")
        .get(0);
    assert!(!in_recovery, "-rw must reach the primary");
    wait_for(
        "the rows on a replica through -ro",
        Duration::from_secs(30),
        || async { count_rows(&world, "shop-ro", "shop").await == 100 },
    )
    .await;
    let replica = world.connect("shop-ro", "shop").await;
    let replica_in_recovery: bool = replica
        .query_one("select pg_is_in_recovery()", &[])
        .await
        .expect("query")
        .get(0);
    assert!(replica_in_recovery, "-ro must reach a replica");

    // Scale 3 -> 2 -> 3: the newest replica goes, a new serial comes.
    let scale = |n: i32| json!({"spec": {"instances": n}});
    world
        .clusters()
        .patch("shop", &PatchParams::default(), &Patch::Merge(&scale(2)))
        .await
        .expect("scale down");
    world.wait_ready("shop", 2).await;
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    let names = || async {
        let mut names: Vec<String> = pods
            .list(&kube::api::ListParams::default().labels("tusk.dev/cluster=shop"))
            .await
            .expect("pods")
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        names
    };
    assert_eq!(names().await, ["shop-1", "shop-2"]);
    world
        .clusters()
        .patch("shop", &PatchParams::default(), &Patch::Merge(&scale(3)))
        .await
        .expect("scale up");
    world.wait_ready("shop", 3).await;
    assert_eq!(
        names().await,
        ["shop-1", "shop-2", "shop-4"],
        "serial 3 is never reused"
    );

    // A killed replica process is restarted and catches up.
    let faults = world.node.as_ref().expect("node").faults();
    faults
        .kill(NS, "shop-2", "postgres")
        .expect("kill the replica's manager");
    primary
        .batch_execute("insert into orders select generate_series(101, 150)")
        .await
        .expect("write while a replica is down");
    wait_for(
        "the killed replica restarted",
        Duration::from_secs(60),
        || async {
            let pod = pods.get("shop-2").await.expect("pod");
            let restarts = pod
                .status
                .and_then(|s| s.container_statuses)
                .and_then(|c| c.into_iter().find(|c| c.name == "postgres"))
                .map_or(0, |c| c.restart_count);
            restarts >= 1
        },
    )
    .await;
    world.wait_ready("shop", 3).await;
    wait_for(
        "every replica to have all 150 rows",
        Duration::from_secs(60),
        || async { count_rows(&world, "shop-ro", "shop").await == 150 },
    )
    .await;

    // The primary freezes: after the failover delay a standby is promoted,
    // -rw follows it, and once thawed the former primary rejoins as a
    // standby without accepting a write (R25).
    let status = || async {
        world
            .clusters()
            .get("shop")
            .await
            .expect("cluster")
            .status
            .unwrap_or_default()
    };
    let old_primary = status().await.current_primary.expect("a current primary");
    faults
        .freeze(NS, &old_primary, "postgres")
        .expect("freeze the primary");
    wait_for(
        "another instance promoted",
        Duration::from_secs(90),
        || async {
            let s = status().await;
            s.current_primary
                .as_ref()
                .is_some_and(|p| *p != old_primary)
                && s.target_primary == s.current_primary
        },
    )
    .await;
    let record = status()
        .await
        .last_failover
        .expect("the failover is recorded");
    assert_eq!(record.from, old_primary);
    let new_primary = world.connect("shop-rw", "shop").await;
    let in_recovery: bool = new_primary
        .query_one("select pg_is_in_recovery()", &[])
        .await
        .expect("query")
        .get(0);
    assert!(!in_recovery, "-rw reaches the promoted instance");
    new_primary
        .batch_execute("insert into orders select generate_series(151, 200)")
        .await
        .expect("write after the failover");
    faults
        .thaw(NS, &old_primary, "postgres")
        .expect("thaw the former primary");
    wait_for(
        "the former primary back as a standby",
        Duration::from_secs(120),
        || async {
            let s = status().await;
            s.ready_instances == 3
                && s.instances
                    .iter()
                    .any(|i| i.name == old_primary && i.role == "replica" && i.ready)
        },
    )
    .await;
    let old_pod = pods.get(&old_primary).await.expect("pod");
    assert_eq!(
        old_pod.labels().get("tusk.dev/role").map(String::as_str),
        Some("replica"),
        "the former primary is out of -rw"
    );
    wait_for(
        "all 200 rows on the standbys",
        Duration::from_secs(60),
        || async { count_rows(&world, "shop-ro", "shop").await == 200 },
    )
    .await;

    world.shutdown().await;
}

/// `kubectl describe` alone explains a cluster that does not converge (R22).
async fn says_why_it_cannot_converge(world: &World) {
    wait_for(
        "the reason in the Ready condition",
        Duration::from_secs(90),
        || async {
            let cluster = world.clusters().get("stuck").await.expect("cluster");
            let ready = cluster
                .status
                .unwrap_or_default()
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Ready");
            ready.is_some_and(|c| c.status == "False" && c.message.contains("stuck-1: "))
        },
    )
    .await;
    let kubeconfig = world._dir.path().join("kubeconfig");
    let output = std::process::Command::new("kubectl")
        .args(["describe", "postgrescluster", "stuck", "-n", NS])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("kubectl runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("Provisioning"), "{text}");
    assert!(
        text.contains("stuck-1: "),
        "the pod's failure is in the description: {text}"
    );
}
