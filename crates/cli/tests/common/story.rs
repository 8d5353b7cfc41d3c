//! What a test prints when it gives up on a cluster, so its failure can
//! be read afterwards.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use kube::api::Api;

use tusk_api::contract::TlsSecret;
use tusk_api::instance::STATUS_PATH;
use tusk_api::v1alpha1::PostgresClusterStatus;

use super::{NS, World};

impl World {
    /// What to print when a test gives up on `cluster`: its events in
    /// order and what each instance manager reports on `/status` now (the
    /// operator decides from these), so a failure can be read afterwards.
    pub async fn story(&self, cluster: &str) -> String {
        use k8s_openapi::api::core::v1::Event;
        let events: Api<Event> = Api::namespaced(self.client.clone(), NS);
        let mut lines = Vec::new();
        if let Ok(list) = events.list(&Default::default()).await {
            let mut items: Vec<Event> = list
                .items
                .into_iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(cluster))
                .collect();
            items.sort_by_key(|e| e.metadata.creation_timestamp.clone());
            for e in items {
                lines.push(format!(
                    "event {:?} x{} {}: {}",
                    e.metadata.creation_timestamp.map(|t| t.0.to_string()),
                    e.count.unwrap_or(1),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default()
                ));
            }
        }
        for instance in self.status(cluster).await.instances {
            let text = match status_response(self, &instance.name, Duration::from_secs(3)).await {
                Ok(response) => response.text().await.unwrap_or_else(|e| e.to_string()),
                Err(why) => why,
            };
            lines.push(format!("{} reports: {text}", instance.name));
        }
        lines.join("\n")
    }
}

/// What changed while a test waited for a cluster, one line per change
/// with the seconds since the timeline started: the primary, the
/// conditions and what each instance manager reports. Printed when the
/// wait gives up, it shows what the operator decided from, in time.
pub struct Timeline {
    start: std::time::Instant,
    next_reports: std::time::Instant,
    seen: std::collections::BTreeMap<String, String>,
    lines: Vec<String>,
}

impl Timeline {
    pub fn new() -> Self {
        let now = std::time::Instant::now();
        Timeline {
            start: now,
            next_reports: now,
            seen: Default::default(),
            lines: Vec::new(),
        }
    }

    fn note(&mut self, key: &str, value: String) {
        if self.seen.get(key) != Some(&value) {
            let at = self.start.elapsed().as_secs_f64();
            self.lines.push(format!("{at:6.1}s {key}: {value}"));
            self.seen.insert(key.to_owned(), value);
        }
    }

    /// Records what changed since the last sample: `status` now, and the
    /// instances' reports at most twice a second.
    pub async fn sample(&mut self, world: &World, status: &PostgresClusterStatus) {
        let primary = format!(
            "current {:?} target {:?} failover {:?}",
            status.current_primary,
            status.target_primary,
            status
                .failover
                .as_ref()
                .and_then(|f| f.blocked.as_ref())
                .map(|b| &b.to)
        );
        self.note("primary", primary);
        let conditions: Vec<String> = status
            .conditions
            .iter()
            .filter(|c| c.type_ != "Ready" && c.type_ != "Progressing")
            .map(|c| format!("{}={}({}) {}", c.type_, c.status, c.reason, c.message))
            .collect();
        self.note("conditions", conditions.join("; "));
        if std::time::Instant::now() < self.next_reports {
            return;
        }
        self.next_reports = std::time::Instant::now() + Duration::from_millis(500);
        for instance in &status.instances {
            let report = report_of(world, &instance.name).await;
            self.note(&instance.name, report);
        }
    }

    /// The timeline; when long, its first and last lines.
    pub fn text(&self) -> String {
        const EACH: usize = 30;
        if self.lines.len() <= 2 * EACH {
            return self.lines.join("\n");
        }
        let (first, last) = (&self.lines[..EACH], &self.lines[self.lines.len() - EACH..]);
        format!(
            "{}\n[{} lines left out]\n{}",
            first.join("\n"),
            self.lines.len() - 2 * EACH,
            last.join("\n")
        )
    }
}

/// The answer of the instance manager `name` to `GET /status` within
/// `timeout`, or why there is none: asked as the operator asks it (over
/// HTTPS, with a token of the cluster's authority).
async fn status_response(
    world: &World,
    name: &str,
    timeout: Duration,
) -> Result<reqwest::Response, String> {
    static CLIENTS: std::sync::OnceLock<tusk_operator::instance_api::InstanceClients> =
        std::sync::OnceLock::new();
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    let pod = pods.get(name).await.map_err(|e| format!("no pod: {e}"))?;
    let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
        return Err("no pod IP".to_owned());
    };
    let cluster = pod
        .labels()
        .get(tusk_api::labels::CLUSTER)
        .cloned()
        .unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let authority = secrets
        .get_opt(&TlsSecret::CaKey.secret_name(cluster.as_str()))
        .await
        .ok()
        .flatten();
    let token_key = secrets
        .get_opt(&TlsSecret::TokenKey.secret_name(cluster.as_str()))
        .await
        .ok()
        .flatten();
    let access = CLIENTS.get_or_init(Default::default).access(
        NS,
        &cluster,
        authority.as_ref(),
        token_key.as_ref(),
    );
    access
        .request(&pod, &ip, tusk_api::contract::HTTP_PORT, STATUS_PATH)?
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| format!("no answer: {e}"))
}

/// What the instance manager `name` reports on `/status` now, or why
/// there is no report.
pub async fn instance_report(
    world: &World,
    name: &str,
) -> Result<tusk_api::instance::InstanceReport, String> {
    // Short: a timeline samples every instance twice a second.
    let answer = status_response(world, name, Duration::from_secs(1)).await?;
    answer.json().await.map_err(|e| format!("unreadable: {e}"))
}

/// One line of what the instance `name` reports, or why it did not.
async fn report_of(world: &World, name: &str) -> String {
    let report = match instance_report(world, name).await {
        Ok(report) => report,
        Err(why) => return why,
    };
    format!(
        "{} {:?} ready={} fenced={} streaming={:?} from={:?} received={:?} reachable={:?} standbys={:?}",
        report.role.as_str(),
        report.phase,
        report.ready,
        report.fenced,
        report.streaming,
        report.upstream,
        report.received_lsn,
        report.api_server_reachable,
        report
            .standbys
            .iter()
            .map(|s| format!("{}:{}:{}", s.name, s.state, s.sync_state))
            .collect::<Vec<_>>()
    )
}
