//! Stand-ins for what a kubelet and the instance managers would do, so the
//! controller's failover can be driven without PostgreSQL: each instance
//! gets its own loopback address (in 127.3.0.0/16, apart from the
//! sandbox's pod addresses) where a small server answers `/status` with the
//! report the test sets, over HTTPS with the cluster's server certificate
//! and to the cluster's tokens only, as an instance manager does (its own
//! TLS code, `tusk_instance::api_tls`), and its pod's status (IP, Ready) is
//! kept as the test says. Only the reports are scripted; the operator is
//! real.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use tusk_api::contract::TlsSecret;
use tusk_api::instance::{DEFAULT_HTTP_PORT, STATUS_PATH};
use tusk_instance::api_tls::ApiTls;

use crate::support::*;

/// One instance as the test scripts it.
#[derive(Clone, Debug)]
struct Instance {
    ip: Ipv4Addr,
    /// The pod's Ready condition.
    ready: bool,
    /// What `/status` answers; `None`: it does not answer.
    report: Option<serde_json::Value>,
}

type Shared = Arc<Mutex<BTreeMap<String, Instance>>>;

/// The scripted instances of one cluster.
pub struct Instances {
    state: Shared,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Instances {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, BTreeMap<String, Instance>> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Instances {
    /// Serves `/status` for `names` (instances of `cluster`) and keeps
    /// their pods' status in line with the script, which starts with the
    /// first as a serving primary at `0/3000000` and the others as ready
    /// standbys that received as much.
    pub async fn start(client: &Client, cluster: &str, names: &[&str]) -> Self {
        let (listeners, ips) = bind(names.len()).await;
        let state: Shared = Arc::default();
        for (i, (name, ip)) in names.iter().zip(&ips).enumerate() {
            let report = if i == 0 {
                primary(name, "0/3000000")
            } else {
                standby(name, "0/3000000", true)
            };
            let instance = Instance {
                ip: *ip,
                ready: true,
                report: Some(report),
            };
            lock(&state).insert((*name).to_owned(), instance);
        }
        let mut tasks = Vec::new();
        for listener in listeners {
            // Served once the operator issued the certificates (the
            // cluster may be created after this).
            let (client, cluster, state) = (client.clone(), cluster.to_owned(), state.clone());
            tasks.push(tokio::spawn(async move {
                let certificates = mounted_certificates(&client, &cluster).await;
                let tls = ApiTls::new(certificates.path().to_owned(), NS, &cluster)
                    .expect("the cluster's certificates serve");
                let tls = Arc::new(tls);
                let app = axum::Router::new()
                    .route(STATUS_PATH, axum::routing::get(status))
                    .with_state((state, tls.clone()));
                tusk_instance::api_tls::serve(listener, app, tls, std::future::pending()).await;
            }));
        }
        tasks.push(tokio::spawn(keep_pods(
            client.clone(),
            cluster.to_owned(),
            state.clone(),
        )));
        Self { state, tasks }
    }

    /// The instance's pod turns unready and its manager stops answering.
    pub fn fail(&self, name: &str) {
        self.set(name, false, None);
    }

    /// Sets the pod's readiness and the manager's report.
    pub fn set(&self, name: &str, ready: bool, report: Option<serde_json::Value>) {
        if let Some(instance) = lock(&self.state).get_mut(name) {
            instance.ready = ready;
            instance.report = report;
        }
    }
}

/// Binds `count` loopback addresses on the instance managers' port, in a
/// /24 of 127.3.0.0/16 no other test of this run holds.
async fn bind(count: usize) -> (Vec<tokio::net::TcpListener>, Vec<Ipv4Addr>) {
    let seed = std::process::id() as usize + rand_offset();
    for attempt in 0..256 {
        let third = u8::try_from((seed + attempt * 7) % 256).unwrap_or(0);
        let mut listeners = Vec::new();
        let mut ips = Vec::new();
        for i in 0..count {
            let ip = Ipv4Addr::new(127, 3, third, u8::try_from(i + 1).unwrap_or(1));
            match tokio::net::TcpListener::bind((ip, DEFAULT_HTTP_PORT)).await {
                Ok(listener) => {
                    listeners.push(listener);
                    ips.push(ip);
                }
                Err(_) => break,
            }
        }
        if listeners.len() == count {
            return (listeners, ips);
        }
    }
    panic!("no free loopback addresses in 127.3.0.0/16 for the instance managers");
}

fn rand_offset() -> usize {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize)
}

/// The cluster's server and replication certificates and the token key's
/// public half, once the operator issued them, in the layout an instance finds them mounted in.
async fn mounted_certificates(client: &Client, cluster: &str) -> tempfile::TempDir {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let dir = tempfile::tempdir().expect("temp dir");
    for which in [
        TlsSecret::Server,
        TlsSecret::Replication,
        TlsSecret::TokenPublicKey,
    ] {
        let name = which.secret_name(cluster);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let secret = loop {
            if let Ok(Some(secret)) = secrets.get_opt(&name).await {
                break secret;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "Secret {name} was not made within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mounted = which.mounted_dir(dir.path()).expect("a mounted Secret");
        std::fs::create_dir_all(&mounted).expect("mount dir");
        for (key, value) in secret.data.unwrap_or_default() {
            std::fs::write(mounted.join(key), value.0).expect("a mounted file");
        }
    }
    dir
}

async fn status(
    State((state, tls)): State<(Shared, Arc<ApiTls>)>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let token = request
        .headers()
        .get(tusk_api::instance::TOKEN_HEADER)
        .and_then(|t| t.to_str().ok());
    if let Err(refusal) = tls.check(token) {
        return (StatusCode::UNAUTHORIZED, refusal.to_string()).into_response();
    }
    // Which instance is asked: the address the request was sent to.
    let host = request
        .headers()
        .get("host")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.split(':').next())
        .and_then(|h| h.parse::<Ipv4Addr>().ok());
    let report = lock(&state)
        .values()
        .find(|i| Some(i.ip) == host)
        .and_then(|i| i.report.clone());
    match report {
        Some(report) => axum::Json(report).into_response(),
        None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// Keeps every scripted pod's IP and Ready condition as the script says.
async fn keep_pods(client: Client, cluster: String, state: Shared) {
    let pods: Api<Pod> = Api::namespaced(client, NS);
    let selector = tusk_api::labels::cluster_selector(&cluster);
    loop {
        if let Ok(list) = pods.list(&ListParams::default().labels(&selector)).await {
            for pod in list.items {
                let Some(wanted) = lock(&state).get(&pod.name_any()).cloned() else {
                    continue;
                };
                let status = pod.status.clone().unwrap_or_default();
                let ready_now = status
                    .conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                let ip = wanted.ip.to_string();
                if status.pod_ip.as_deref() == Some(ip.as_str()) && ready_now == wanted.ready {
                    continue;
                }
                let patch = json!({"status": {
                    "phase": "Running",
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                    "conditions": [{
                        "type": "Ready",
                        "status": if wanted.ready { "True" } else { "False" },
                        "lastTransitionTime": Time(Timestamp::now()),
                    }],
                }});
                let _ = pods
                    .patch_status(
                        &pod.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A serving primary's report at `lsn`.
pub fn primary(name: &str, lsn: &str) -> serde_json::Value {
    json!({
        "name": name, "role": "primary", "phase": "running", "ready": true, "fenced": false,
        "timeline": 1, "currentLsn": lsn,
    })
}

/// A standby's report, having received and replayed up to `received`;
/// `streaming` while its primary serves.
pub fn standby(name: &str, received: &str, streaming: bool) -> serde_json::Value {
    json!({
        "name": name, "role": "replica", "phase": "running", "ready": streaming,
        "fenced": false, "timeline": 1, "receivedLsn": received, "replayedLsn": received,
        "streaming": streaming,
    })
}
