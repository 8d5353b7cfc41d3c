//! End to end on the full sandbox (API server, kubelet, Service proxy) with
//! real PostgreSQL and the operator in process: a declared cluster becomes
//! a replicated database reachable through its Services, scales down and
//! up, survives a killed replica, and explains itself when it cannot
//! converge (R7-R16, R22, R24).

mod common;

use std::time::Duration;

use common::{NS, World, count_rows, wait_for};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_cluster_becomes_a_replicated_database_that_scales_and_heals() {
    let world = World::start().await;
    world
        .create_cluster(
            "shop",
            json!({"instances": 3, "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                   "storage": {"size": "1Gi"},
                   "failover": {"delaySeconds": 5, "dataDurability": "preferred"}}),
        )
        .await;
    // A cluster that cannot converge: no image rule of the sandbox maps
    // its image to programs here.
    world
        .create_cluster(
            "stuck",
            json!({"instances": 1, "storage": {"size": "1Gi"},
                   "postgres": {"version": 15, "image": "registry.example/unmapped:15"}}),
        )
        .await;
    world.wait_ready("shop", 3).await;
    assert_eq!(
        world.status("shop").await.latest_instance_serial,
        3,
        "each instance created once (a pass ahead of the caches made a fourth)"
    );
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
    let kubeconfig = world.kubeconfig();
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
