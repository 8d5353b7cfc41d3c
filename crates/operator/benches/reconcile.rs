//! Reconcile throughput, latency, API cost and operator memory with many
//! clusters (R33), printed as figures (not a timed test).
//!
//! ```sh
//! cargo build --release -p tusk
//! cargo bench -p tusk-operator --bench reconcile -- 100 1000
//! ```
//!
//! The sandbox API server runs in this process (no kubelet, so pods never
//! become ready and each cluster stops at its first instance); the operator
//! runs as its own process (`target/release/tusk operator`, or `TUSK_BIN`),
//! so its resident memory is measured alone.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_sandbox::server::{Config, Sandbox};

const NS: &str = "bench";

struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tusk_binary() -> PathBuf {
    std::env::var_os("TUSK_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/tusk")
        })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn memory_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18080)
}

async fn metric(port: u16, name: &str) -> f64 {
    let Ok(response) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await else {
        return 0.0;
    };
    let text = response.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Quantile estimate from the operator's reconcile-duration histogram.
async fn histogram_quantile(port: u16, quantile: f64) -> f64 {
    let Ok(response) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await else {
        return f64::NAN;
    };
    let text = response.text().await.unwrap_or_default();
    let mut buckets: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("tusk_operator_reconcile_duration_seconds_bucket{le=\""))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.trim().parse().ok()?))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().map_or(0.0, |b| b.1);
    buckets
        .iter()
        .find(|(_, count)| *count >= total * quantile)
        .map_or(f64::NAN, |(le, _)| *le)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// A sandbox API server with the CRDs installed and the bench namespace.
async fn start_sandbox() -> (Sandbox, tempfile::TempDir, kube::Client) {
    let dir = tempfile::tempdir().expect("temp dir");
    let sandbox = Sandbox::start(Config::new(dir.path()))
        .await
        .expect("sandbox");
    let client = tusk_sandbox::client::from_kubeconfig(sandbox.kubeconfig_path())
        .await
        .expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in tusk_api::crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD");
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
    let api: Api<PostgresCluster> = Api::namespaced(client.clone(), NS);
    let started_waiting = Instant::now();
    while api.list(&ListParams::default().limit(1)).await.is_err() {
        assert!(
            started_waiting.elapsed() < Duration::from_secs(30),
            "CRD never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    (sandbox, dir, client)
}

/// The plain environment variables the install manifest gives the
/// operator's container (those that tune the process, such as the
/// allocator's), so the figures are those of the operator as shipped.
fn shipped_environment() -> Vec<(String, String)> {
    tusk_operator::install::deployment()
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.env)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.value_from.is_none() && !e.name.starts_with("TUSK_"))
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

/// The operator as its own process, serving metrics on the returned port.
fn start_operator(sandbox: &Sandbox) -> (Operator, u16) {
    let port = free_port();
    let operator = Operator(
        Command::new(tusk_binary())
            .args([
                "operator",
                "--no-leader-election",
                "--concurrency",
                "8",
                "--http-address",
            ])
            .arg(format!("127.0.0.1:{port}"))
            .envs(shipped_environment())
            .env("KUBECONFIG", sandbox.kubeconfig_path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e} (build it: cargo build --release -p tusk)",
                    tusk_binary().display()
                )
            }),
    );
    (operator, port)
}

/// Creates `clusters` one-instance clusters; when each was created.
async fn create_clusters(api: &Api<PostgresCluster>, clusters: usize) -> Vec<(String, Instant)> {
    stream::iter(0..clusters)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = format!("c{i}");
                let cluster: PostgresCluster = serde_json::from_value(json!({
                    "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                    "metadata": {"name": name},
                    "spec": {"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}
                }))
                .expect("cluster");
                api.create(&PostParams::default(), &cluster).await.expect("created");
                (name, Instant::now())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await
}

/// When each cluster converged: status written (target primary chosen)
/// and its pod exists.
async fn wait_converged(
    client: &kube::Client,
    api: &Api<PostgresCluster>,
    clusters: usize,
) -> std::collections::BTreeMap<String, Instant> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut converged_at: std::collections::BTreeMap<String, Instant> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(600);
    while converged_at.len() < clusters && Instant::now() < deadline {
        let listed = api
            .list(&ListParams::default())
            .await
            .expect("list clusters");
        let pod_names: std::collections::BTreeSet<String> = pods
            .list(&ListParams::default())
            .await
            .expect("list pods")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let now = Instant::now();
        for cluster in listed.items {
            let name = cluster.metadata.name.clone().unwrap_or_default();
            let done = cluster
                .status
                .as_ref()
                .is_some_and(|s| s.target_primary.is_some())
                && pod_names.contains(&format!("{name}-1"));
            if done {
                converged_at.entry(name).or_insert(now);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    converged_at
}

async fn run(clusters: usize) {
    let (sandbox, _dir, client) = start_sandbox().await;
    let api: Api<PostgresCluster> = Api::namespaced(client.clone(), NS);
    let (operator, port) = start_operator(&sandbox);
    let pid = operator.0.id();
    let idle_rss = {
        tokio::time::sleep(Duration::from_secs(2)).await;
        memory_kib(pid, "VmRSS:")
    };

    let requests_before = sandbox.faults().count("*", "*");
    let created_at = Instant::now();
    let mut creations = create_clusters(&api, clusters).await;
    creations.sort();
    let create_seconds = created_at.elapsed().as_secs_f64();

    let converged_at = wait_converged(&client, &api, clusters).await;
    let all_converged = created_at.elapsed().as_secs_f64();
    let mut latencies: Vec<f64> = creations
        .iter()
        .filter_map(|(name, at)| Some(converged_at.get(name)?.duration_since(*at).as_secs_f64()))
        .collect();
    latencies.sort_by(f64::total_cmp);
    let provisioning_requests = sandbox.faults().count("*", "*") - requests_before;

    // Steady state: every cluster requeues every 10 s; count what it costs.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reconciles_before = metric(port, "tusk_operator_reconciles_total").await;
    let requests_before = sandbox.faults().count("*", "*");
    let writes_before = sandbox.faults().writes();
    tokio::time::sleep(Duration::from_secs(21)).await;
    let steady_reconciles =
        metric(port, "tusk_operator_reconciles_total").await - reconciles_before;
    let steady_requests = sandbox.faults().count("*", "*") - requests_before;
    let steady_writes = sandbox.faults().writes() - writes_before;

    let p50 = histogram_quantile(port, 0.50).await;
    let p95 = histogram_quantile(port, 0.95).await;
    let rss = memory_kib(pid, "VmRSS:");
    let peak = memory_kib(pid, "VmHWM:");
    let sizes = child_sizes(&client, clusters).await;
    let counts_before = sandbox.faults().counts();
    let reconciles_before_changes = metric(port, "tusk_operator_reconciles_total").await;
    let changes = spec_changes(&api, converged_at.keys().cloned().collect()).await;
    let during_changes = requests_since(&counts_before, &sandbox.faults().counts());
    let reconciles_during_changes =
        metric(port, "tusk_operator_reconciles_total").await - reconciles_before_changes;
    println!("clusters: {clusters} (1 instance each, API server only)");
    println!(
        "  created in {create_seconds:.1} s; all converged after {all_converged:.1} s ({} of {clusters})",
        converged_at.len()
    );
    println!(
        "  throughput: {:.1} clusters/s",
        converged_at.len() as f64 / all_converged
    );
    println!(
        "  create -> converged latency: p50 {:.2} s, p95 {:.2} s, max {:.2} s",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        latencies.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  reconcile duration (operator histogram bucket bound): p50 <= {p50} s, p95 <= {p95} s"
    );
    println!(
        "  API requests while provisioning: {provisioning_requests} ({:.1} per cluster)",
        provisioning_requests as f64 / clusters as f64
    );
    println!(
        "  steady state over 21 s: {steady_reconciles} reconciles, {steady_requests} API requests ({:.3} per converged reconcile), {steady_writes} writes",
        steady_requests as f64 / steady_reconciles.max(1.0)
    );
    println!(
        "  operator memory: idle {:.1} MiB, now {:.1} MiB (heap and stacks {:.1} MiB, the binary's pages {:.1} MiB), peak {:.1} MiB",
        mib(idle_rss),
        mib(rss),
        mib(memory_kib(pid, "RssAnon:")),
        mib(memory_kib(pid, "RssFile:")),
        mib(peak)
    );
    println!("  children per cluster, as JSON without managedFields: {sizes}");
    println!(
        "  spec change -> status.observedGeneration ({} changes at {SPEC_CHANGES_PER_SECOND}/s, {} not observed): p50 {:.3} s, p95 {:.3} s, p99 {:.3} s, max {:.3} s",
        changes.latencies.len(),
        changes.missed,
        percentile(&changes.latencies, 0.50),
        percentile(&changes.latencies, 0.95),
        percentile(&changes.latencies, 0.99),
        changes.latencies.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  while the spec changes ran: {reconciles_during_changes} reconciles; requests by verb and resource: {during_changes}"
    );
    if clusters >= 1000 {
        let p99 = percentile(&changes.latencies, 0.99);
        println!(
            "  targets at {clusters} clusters: operator RSS <= {RSS_TARGET_MIB} MiB: {} ({:.1} MiB); spec change p99 <= {OBSERVED_TARGET_SECONDS} s: {} ({p99:.3} s)",
            verdict(rss <= RSS_TARGET_MIB * 1024),
            mib(rss),
            verdict(changes.missed == 0 && p99 <= OBSERVED_TARGET_SECONDS),
        );
    }
    drop(operator);
}

/// The requests made between two snapshots of the sandbox's counters, by
/// verb and resource (a `list` here is a watcher that had to start again).
fn requests_since(
    before: &std::collections::BTreeMap<(String, String), u64>,
    after: &std::collections::BTreeMap<(String, String), u64>,
) -> String {
    after
        .iter()
        .filter_map(|(key, n)| {
            let made = n - before.get(key).copied().unwrap_or(0);
            (made > 0).then(|| format!("{} {} {made}", key.0, key.1))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Bytes per cluster of each child kind as the API serves it (without
/// managedFields, which the operator never caches): where a cache of whole
/// objects would spend its memory.
async fn child_sizes(client: &kube::Client, clusters: usize) -> String {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service, ServiceAccount};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    async fn bytes<K>(client: &kube::Client) -> usize
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
        K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(client.clone(), NS);
        let Ok(list) = api.list(&ListParams::default()).await else {
            return 0;
        };
        list.items
            .into_iter()
            .map(|mut object| {
                object.meta_mut().managed_fields = None;
                serde_json::to_vec(&object).map_or(0, |b| b.len())
            })
            .sum()
    }
    let per_cluster = |total: usize| total / clusters.max(1);
    format!(
        "Pod {} B, PVC {} B, Secret {} B, Service {} B, ServiceAccount {} B, Role {} B, RoleBinding {} B, PDB {} B",
        per_cluster(bytes::<Pod>(client).await),
        per_cluster(bytes::<PersistentVolumeClaim>(client).await),
        per_cluster(bytes::<Secret>(client).await),
        per_cluster(bytes::<Service>(client).await),
        per_cluster(bytes::<ServiceAccount>(client).await),
        per_cluster(bytes::<Role>(client).await),
        per_cluster(bytes::<RoleBinding>(client).await),
        per_cluster(bytes::<PodDisruptionBudget>(client).await),
    )
}

/// Targets for 1,000 converged clusters.
const RSS_TARGET_MIB: u64 = 40;
const OBSERVED_TARGET_SECONDS: f64 = 1.0;
/// Spec changes are spread out rather than sent at once: the figure is
/// the latency of one change while the operator holds every cluster, not
/// the time to drain a queue of a thousand.
const SPEC_CHANGES_PER_SECOND: u32 = 50;
/// How long a change may take to be observed before it counts as missed.
const OBSERVED_TIMEOUT: Duration = Duration::from_secs(60);

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

struct SpecChanges {
    /// Seconds from each update to the first watch event showing its
    /// generation observed, sorted.
    latencies: Vec<f64>,
    missed: usize,
}

/// Changes a server parameter of every named cluster (the operator only
/// has to record the new generation) and times each change until a watch
/// event shows `status.observedGeneration` at the new generation.
async fn spec_changes(api: &Api<PostgresCluster>, names: Vec<String>) -> SpecChanges {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    // name -> (generation the change produced, when it was sent)
    let sent: Arc<Mutex<HashMap<String, (i64, Instant)>>> = Arc::default();
    let observed: Arc<Mutex<HashMap<String, f64>>> = Arc::default();
    let watch = {
        let (sent, observed) = (sent.clone(), observed.clone());
        let events = watcher(api.clone(), watcher::Config::default()).touched_objects();
        tokio::spawn(async move {
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                let Ok(cluster) = event else { continue };
                let now = Instant::now();
                let name = cluster.metadata.name.clone().unwrap_or_default();
                let seen = cluster.status.as_ref().and_then(|s| s.observed_generation);
                let Some(&(generation, at)) = sent.lock().expect("sent").get(&name) else {
                    continue;
                };
                if seen.is_some_and(|seen| seen >= generation) {
                    observed
                        .lock()
                        .expect("observed")
                        .entry(name)
                        .or_insert_with(|| now.duration_since(at).as_secs_f64());
                }
            }
        })
    };
    // Let the watch list before the first change.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / SPEC_CHANGES_PER_SECOND);
    let patch = json!({"spec": {"postgres": {"parameters": {"work_mem": "8MB"}}}});
    let mut patches = Vec::new();
    for name in &names {
        ticks.tick().await;
        let (api, sent, patch, name) = (api.clone(), sent.clone(), patch.clone(), name.clone());
        patches.push(tokio::spawn(async move {
            let Ok(before) = api.get(&name).await else {
                return;
            };
            let generation = before.metadata.generation.unwrap_or(0) + 1;
            sent.lock()
                .expect("sent")
                .insert(name.clone(), (generation, Instant::now()));
            if api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_err()
            {
                sent.lock().expect("sent").remove(&name);
            }
        }));
    }
    for patch in patches {
        let _ = patch.await;
    }
    let deadline = Instant::now() + OBSERVED_TIMEOUT;
    let expected = sent.lock().expect("sent").len();
    while observed.lock().expect("observed").len() < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watch.abort();
    let mut latencies: Vec<f64> = observed
        .lock()
        .expect("observed")
        .values()
        .copied()
        .collect();
    latencies.sort_by(f64::total_cmp);
    SpecChanges {
        missed: names.len() - latencies.len(),
        latencies,
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() { vec![100] } else { sizes };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for clusters in sizes {
        runtime.block_on(run(clusters));
    }
}
