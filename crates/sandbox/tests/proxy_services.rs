//! Services carry real traffic: a PostgreSQL server run as a pod is reached
//! with psql through its Service address, and readiness (probes, a frozen
//! process, injected failure) decides whether the Service sends traffic.
//! Connections keep kube-proxy's semantics (an established one outlives
//! its endpoint), and a pod can be cut off from its Service's clients.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, PersistentVolumeClaim, Service};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::{Node, WAIT, condition, eventually, pod_json};
use tusk_sandbox::node::proxy::cuts::Direction;

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

/// A port free on 127.1.0.1.
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
    // Sandboxes hand out cluster IPs from a block of their own, but two may
    // share one (1 in 255); a port free on 127.1.0.1 makes a clash on the
    // usual 5432 still less likely.
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

/// A TCP server on `ip:port` (0: any port) that answers each read with
/// `tag` and what it read.
async fn tagged_echo(ip: &str, port: u16, tag: &'static [u8]) -> (std::net::SocketAddr, TaskGuard) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind((ip, port))
        .await
        .expect("bind a backend");
    let address = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = socket.read(&mut buf).await {
                    let reply = [tag, &buf[..n]].concat();
                    if n == 0 || socket.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (address, TaskGuard(task))
}

struct TaskGuard(tokio::task::JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends `text` and reads the one-byte tag and the echo, within a second.
async fn ask(stream: &mut tokio::net::TcpStream, text: &[u8]) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        stream.write_all(text).await?;
        let mut buf = vec![0u8; text.len() + 1];
        stream.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    tokio::time::timeout(Duration::from_secs(1), exchange)
        .await
        .ok()?
        .ok()
}

async fn connect(address: &str) -> tokio::net::TcpStream {
    tokio::time::timeout(WAIT, tokio::net::TcpStream::connect(address))
        .await
        .expect("connected in time")
        .expect("connected")
}

/// A Service without a selector, whose Endpoints the test writes itself
/// (as one does for a backend outside the cluster), naming each address's
/// pod so cuts can find it.
async fn manual_service(node: &Node, backends: &[(&str, std::net::SocketAddr)]) -> String {
    let port = free_service_port();
    let services: Api<Service> = Api::namespaced(node.client.clone(), NS);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"ports": [{"port": port, "targetPort": 5432}]}
    }))
    .expect("service");
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("service created");
    set_endpoints(node, backends).await;
    let ip = service.spec.and_then(|s| s.cluster_ip).expect("cluster IP");
    format!("{ip}:{port}")
}

async fn set_endpoints(node: &Node, backends: &[(&str, std::net::SocketAddr)]) {
    let endpoints: Api<Endpoints> = Api::namespaced(node.client.clone(), NS);
    let port = backends.first().map_or(5432, |(_, a)| a.port());
    let addresses: Vec<Value> = backends
        .iter()
        .map(|(pod, address)| {
            assert_eq!(address.port(), port, "one port for every backend");
            json!({"ip": address.ip().to_string(),
                   "targetRef": {"kind": "Pod", "namespace": NS, "name": pod}})
        })
        .collect();
    let subsets = if addresses.is_empty() {
        json!([])
    } else {
        json!([{"addresses": addresses, "ports": [{"port": port}]}])
    };
    let object = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "db", "namespace": NS},
        "subsets": subsets
    });
    endpoints
        .patch(
            "db",
            &kube::api::PatchParams::apply("test").force(),
            &kube::api::Patch::Apply(&object),
        )
        .await
        .expect("endpoints written");
}

/// Waits until a new connection through the Service is answered with `tag`
/// (or, for `None`, until none is answered).
async fn new_connections_answer(service: &str, tag: Option<u8>) {
    eventually("new connections to follow the endpoints", WAIT, || async {
        let Ok(Ok(mut stream)) = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(service),
        )
        .await
        else {
            return tag.is_none().then_some(());
        };
        let answer = ask(&mut stream, b"?").await;
        (answer.as_ref().map(|a| a[0]) == tag).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_established_connection_outlives_its_endpoint_leaving_the_service() {
    let node = Node::start().await;
    let (old, _a) = tagged_echo("127.2.250.1", 0, b"A").await;
    let (new, _b) = tagged_echo("127.2.250.2", old.port(), b"B").await;
    let service = manual_service(&node, &[("db-0", old)]).await;
    new_connections_answer(&service, Some(b'A')).await;
    let mut established = connect(&service).await;
    assert_eq!(
        ask(&mut established, b"1").await.as_deref(),
        Some(&b"A1"[..])
    );

    // The endpoint moves, as a failover repoints a Service.
    set_endpoints(&node, &[("db-1", new)]).await;
    new_connections_answer(&service, Some(b'B')).await;
    assert_eq!(
        ask(&mut established, b"2").await.as_deref(),
        Some(&b"A2"[..]),
        "a connection made before the endpoint left stays with it, as conntrack keeps it"
    );

    // No endpoint at all: new connections are refused, old ones carry on.
    set_endpoints(&node, &[]).await;
    new_connections_answer(&service, None).await;
    assert_eq!(
        ask(&mut established, b"3").await.as_deref(),
        Some(&b"A3"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cut_off_from_its_clients_gets_no_traffic_until_healed() {
    let node = Node::start().await;
    let (server, _a) = tagged_echo("127.2.250.3", 0, b"A").await;
    let service = manual_service(&node, &[("db-0", server)]).await;
    new_connections_answer(&service, Some(b'A')).await;
    let mut established = connect(&service).await;
    assert_eq!(
        ask(&mut established, b"1").await.as_deref(),
        Some(&b"A1"[..])
    );
    let cuts = node.faults().service_cuts();
    cuts.cut(NS, "db-0", Direction::Both);
    assert_eq!(ask(&mut established, b"2").await, None, "dropped while cut");
    let mut during = connect(&service).await;
    assert_eq!(ask(&mut during, b"3").await, None, "a new connection hangs");
    cuts.heal(NS, "db-0");
    let mut held = [0u8; 2];
    for stream in [&mut established, &mut during] {
        tokio::time::timeout(WAIT, tokio::io::AsyncReadExt::read_exact(stream, &mut held))
            .await
            .expect("held bytes delivered once healed")
            .expect("read");
        assert_eq!(held[0], b'A');
    }
    assert_eq!(
        ask(&mut established, b"4").await.as_deref(),
        Some(&b"A4"[..])
    );
}
