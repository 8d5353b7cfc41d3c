//! What a test prints when it gives up on a cluster, so its failure can
//! be read afterwards.

use std::time::Duration;

use kube::api::Api;

use super::{NS, World, pod_ip};

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
            let report = match pod_ip(self, &instance.name).await {
                Some(ip) => reqwest::Client::new()
                    .get(format!(
                        "http://{ip}:{}/status",
                        tusk_api::contract::HTTP_PORT
                    ))
                    .timeout(Duration::from_secs(3))
                    .send()
                    .await
                    .map(|r| r.text()),
                None => {
                    lines.push(format!("{}: no pod IP", instance.name));
                    continue;
                }
            };
            let text = match report {
                Ok(body) => body.await.unwrap_or_else(|e| e.to_string()),
                Err(e) => format!("no answer: {e}"),
            };
            lines.push(format!("{} reports: {text}", instance.name));
        }
        lines.join("\n")
    }
}
