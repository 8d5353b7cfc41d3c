//! Services carry real traffic: a PostgreSQL server run as a pod is reached
//! with psql through its Service address, and readiness (probes, a frozen
//! process, injected failure) decides whether the Service sends traffic.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, PersistentVolumeClaim, Service};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::{Node, WAIT, condition, eventually, pod_json};

const NS: &str = "default";
const DATA: &str = "/var/lib/postgresql/data";

fn postgres_pod(uid: u32, gid: u32) -> Value {
    let init = format!(
        "test -f {DATA}/pgdata/PG_VERSION || {{ initdb -D {DATA}/pgdata -U postgres --auth=trust >/dev/null && echo 'host all all 127.0.0.0/8 trust' >> {DATA}/pgdata/pg_hba.conf; }}"
    );
    let mounts = json!([
        {"name": "data", "mountPath": DATA},
        {"name": "run", "mountPath": "/var/run/postgresql"}
    ]);
    json!({
        "metadata": {"name": "pg-0", "labels": {"app": "pg"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": uid, "runAsGroup": gid, "fsGroup": gid},
            "terminationGracePeriodSeconds": 10,
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "pg-data"}},
                {"name": "run", "emptyDir": {}}
            ],
            "initContainers": [{
                "name": "initdb", "image": "postgres:15",
                "command": ["sh", "-c", init],
                "volumeMounts": mounts
            }],
            "containers": [{
                "name": "postgres", "image": "postgres:15",
                "command": ["postgres", "-D", format!("{DATA}/pgdata"),
                    "-c", "listen_addresses=$(POD_IP)", "-c", "unix_socket_directories=/var/run/postgresql"],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "ports": [{"name": "postgres", "containerPort": 5432}],
                "readinessProbe": {
                    "exec": {"command": ["sh", "-c", "pg_isready -q -h $POD_IP -p 5432"]},
                    "periodSeconds": 1, "timeoutSeconds": 1, "failureThreshold": 1
                },
                "volumeMounts": mounts
            }]
        }
    })
}

async fn psql(address: &str, port: u16, sql: &str) -> Result<String, String> {
    let run = tokio::process::Command::new("psql")
        .args([
            "-h",
            address,
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-X",
            "-q",
            "-A",
            "-t",
            "-c",
            sql,
        ])
        .env("PGCONNECT_TIMEOUT", "3")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .map_err(|_| "psql timed out".to_owned())?
        .map_err(|e| format!("psql cannot run (is PostgreSQL's client installed?): {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

async fn ready_addresses(endpoints: &Api<Endpoints>) -> Option<usize> {
    let endpoints = endpoints.get_opt("pg").await.ok()??;
    Some(
        endpoints
            .subsets
            .unwrap_or_default()
            .iter()
            .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
            .sum(),
    )
}

/// A port free on 127.1.0.1, the first cluster IP a sandbox hands out.
fn free_service_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.1.0.1:0").expect("a free port");
    probe.local_addr().expect("address").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_reaches_a_postgres_pod_through_its_service_while_it_is_ready() {
    let node = Node::start().await;
    let postgres = nix::unistd::User::from_name("postgres")
        .expect("user lookup")
        .expect("the postgres user exists (scripts/setup installs PostgreSQL)");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.client.clone(), NS);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "pg-data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim created");
    let services: Api<Service> = Api::namespaced(node.client.clone(), NS);
    // Every sandbox hands out cluster IPs from 127.1.0.1, so another one on
    // this machine may hold 127.1.0.1:5432; a port free on the first cluster
    // IPs keeps this Service apart.
    let port = free_service_port();
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "pg"},
        "spec": {"selector": {"app": "pg"}, "ports": [{"name": "postgres", "port": port, "targetPort": "postgres"}]}
    }))
    .expect("service");
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("service created");
    let cluster_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");

    node.create_pod(
        NS,
        postgres_pod(postgres.uid.as_raw(), postgres.gid.as_raw()),
    )
    .await;
    let pods = node.pods(NS);
    let endpoints: Api<Endpoints> = Api::namespaced(node.client.clone(), NS);
    let slow = Duration::from_secs(90);
    eventually(
        "PostgreSQL to be ready behind the Service",
        slow,
        || async {
            let pod = pod_json(&pods, "pg-0").await?;
            if pod["status"]["phase"] == "Failed" {
                panic!("postgres pod failed: {pod}");
            }
            (condition(&pod, "Ready").as_deref() == Some("True")).then_some(())?;
            (ready_addresses(&endpoints).await? == 1).then_some(())
        },
    )
    .await;

    let answer = eventually("psql through the Service", WAIT, || async {
        psql(
            &cluster_ip,
            port,
            "create table if not exists t (x int); insert into t values (42); select sum(x) from t",
        )
        .await
        .ok()
    })
    .await;
    assert_eq!(answer, "42");

    // Injected readiness failure takes the pod out of the Service.
    let faults = node.faults();
    faults.fail_readiness(NS, "pg-0", true);
    eventually("the endpoint to leave", WAIT, || async {
        (ready_addresses(&endpoints).await? == 0).then_some(())
    })
    .await;
    let refused = psql(&cluster_ip, port, "select 1").await;
    assert!(
        refused.is_err(),
        "no ready endpoint, yet psql got {refused:?}"
    );
    faults.fail_readiness(NS, "pg-0", false);
    eventually("the endpoint to return", WAIT, || async {
        (ready_addresses(&endpoints).await? == 1).then_some(())
    })
    .await;
    let answer = eventually("psql again", WAIT, || async {
        psql(&cluster_ip, port, "select sum(x) from t").await.ok()
    })
    .await;
    assert_eq!(answer, "42");

    // A frozen server fails its readiness probe; thawed, it is back.
    faults.freeze(NS, "pg-0", "postgres").expect("freeze");
    eventually("the frozen pod to turn unready", WAIT, || async {
        (ready_addresses(&endpoints).await? == 0).then_some(())
    })
    .await;
    faults.thaw(NS, "pg-0", "postgres").expect("thaw");
    eventually("the thawed pod to be ready", WAIT, || async {
        (ready_addresses(&endpoints).await? == 1).then_some(())
    })
    .await;
    let answer = eventually("psql after the thaw", WAIT, || async {
        psql(&cluster_ip, port, "select sum(x) from t").await.ok()
    })
    .await;
    assert_eq!(answer, "42");
    let pod = pod_json(&pods, "pg-0").await.expect("pod");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["restartCount"], 0,
        "{pod}"
    );
}
