//! Reading each instance manager's `/status` (DESIGN: instance status comes
//! from the instance managers, polled concurrently with timeouts).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tusk_api::conditions;
use tusk_api::instance::{DEFAULT_HTTP_PORT, InstanceReport, STATUS_PATH};
use tusk_api::v1alpha1::PostgresClusterStatus;

use crate::metrics::Metrics;

/// How long one instance may take to answer.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(2);

/// Instances not worth waiting for in this reconcile: a failing primary,
/// or the one a failover is replacing, whose pod is not ready and whose
/// manager did not answer last time. Waiting [`POLL_TIMEOUT`] for it in
/// every reconcile of a failover would delay the failover by as much; its
/// pod turning ready again triggers the next reconcile, which polls it.
/// Standbys are always polled: a failover needs their positions.
pub fn not_worth_polling(status: Option<&PostgresClusterStatus>, pods: &[Pod]) -> Vec<String> {
    let Some(status) = status else {
        return Vec::new();
    };
    let failing =
        conditions::find_condition(&status.conditions, crate::failover::PRIMARY_AVAILABLE)
            .is_some_and(|c| c.status == "False")
            .then_some(status.target_primary.as_ref())
            .flatten();
    let replaced = status
        .last_failover
        .as_ref()
        .filter(|_| status.current_primary != status.target_primary)
        .map(|f| &f.from);
    [failing, replaced]
        .into_iter()
        .flatten()
        .filter(|name| {
            let silent = status
                .instances
                .iter()
                .any(|i| &i.name == *name && i.role == "unknown");
            let unready = pods
                .iter()
                .find(|p| p.name_any() == **name)
                .is_some_and(|p| !crate::children::pod_ready(p));
            silent && unready
        })
        .cloned()
        .collect()
}

/// Polls every pod that has an IP, except those named in `skip`; pods that
/// do not answer are absent from the result (their role is then unknown).
pub async fn poll_instances(
    http: &reqwest::Client,
    pods: &[Pod],
    skip: &[String],
    metrics: &Metrics,
) -> BTreeMap<String, InstanceReport> {
    let polls = pods.iter().filter_map(|pod| {
        let name = pod.name_any();
        if skip.contains(&name) {
            return None;
        }
        let ip = pod.status.as_ref()?.pod_ip.clone()?;
        Some(async move {
            let started = Instant::now();
            let url = format!("http://{ip}:{DEFAULT_HTTP_PORT}{STATUS_PATH}");
            let report = async {
                http.get(&url)
                    .timeout(POLL_TIMEOUT)
                    .send()
                    .await?
                    .error_for_status()?
                    .json::<InstanceReport>()
                    .await
            }
            .await;
            metrics.instance_polled(started);
            match report {
                Ok(report) => Some((name, report)),
                Err(error) => {
                    tracing::debug!(instance = %name, %error, "instance manager did not answer");
                    None
                }
            }
        })
    });
    join_all(polls).await.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        }))
        .expect("pod")
    }

    fn status(primary_available: &str, db1_role: &str) -> PostgresClusterStatus {
        serde_json::from_value(serde_json::json!({
            "currentPrimary": "db-1", "targetPrimary": "db-1",
            "instances": [
                {"name": "db-1", "role": db1_role, "ready": false},
                {"name": "db-2", "role": "unknown", "ready": false}
            ],
            "conditions": [{"type": "PrimaryAvailable", "status": primary_available, "reason": "X",
                            "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z"}]
        }))
        .expect("status")
    }

    #[test]
    fn only_a_silent_unready_failing_primary_is_skipped() {
        let pods = [pod("db-1", false), pod("db-2", false)];
        let failing = status("False", "unknown");
        assert_eq!(not_worth_polling(Some(&failing), &pods), ["db-1"]);
        // A standby is polled even when it did not answer: a failover needs it.
        assert!(!not_worth_polling(Some(&failing), &pods).contains(&"db-2".to_owned()));
        // Still answering, serving, or ready again: polled.
        assert!(not_worth_polling(Some(&status("False", "primary")), &pods).is_empty());
        assert!(not_worth_polling(Some(&status("True", "unknown")), &pods).is_empty());
        let ready = [pod("db-1", true), pod("db-2", false)];
        assert!(not_worth_polling(Some(&failing), &ready).is_empty());
    }

    #[test]
    fn the_primary_being_replaced_is_skipped_until_the_new_one_serves() {
        let mut replacing = status("Unknown", "unknown");
        replacing.target_primary = Some("db-2".into());
        replacing.last_failover = serde_json::from_value(serde_json::json!({
            "time": "2026-12-02T10:00:00Z", "from": "db-1", "to": "db-2",
            "reason": "Failover", "lsnGapBytes": 0
        }))
        .expect("record");
        let pods = [pod("db-1", false), pod("db-2", false)];
        assert_eq!(not_worth_polling(Some(&replacing), &pods), ["db-1"]);
        replacing.current_primary = Some("db-2".into());
        assert!(not_worth_polling(Some(&replacing), &pods).is_empty());
    }
}
