//! Reading each instance manager's `/status` (`CONTRIBUTING.md`, 8:
//! instance status comes from the instance managers, polled concurrently
//! with timeouts).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tusk_api::instance::{DEFAULT_HTTP_PORT, InstanceReport, STATUS_PATH, TOKEN_HEADER};
use tusk_api::v1alpha1::PostgresClusterStatus;

use crate::instance_api::ClusterAccess;
use crate::metrics::Metrics;

/// How long an instance that answered last time may take to answer.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an instance that is silent and unready may take: a hung or
/// stopped manager would otherwise hold every reconcile for
/// [`POLL_TIMEOUT`] (during a failover, or for as long as a former primary
/// stays hung), while a manager that came back answers in milliseconds and
/// gets the full timeout again once its pod is ready. Each pass of a
/// failover waits this long on the hung former primary (the decision, then
/// every look at the promotion), so it is short: a manager answers in a
/// few milliseconds, over TLS included.
pub const BRIEF_POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// Instances to poll only briefly: those that did not answer last time
/// (role `unknown` in the status) and whose pods are not ready, or, while
/// a promotion is under way (the target is not yet the current primary),
/// whose pods exist: a hung former primary's pod stays ready for a few
/// seconds (two failed readiness probes), and waiting the full timeout on
/// it would delay seeing the new primary serve by as much. All are still
/// polled, standbys included: a failover needs their positions.
pub fn poll_briefly(status: Option<&PostgresClusterStatus>, pods: &[Pod]) -> Vec<String> {
    let Some(status) = status else {
        return Vec::new();
    };
    let promoting =
        status.target_primary.is_some() && status.target_primary != status.current_primary;
    status
        .instances
        .iter()
        .filter(|i| i.reported_role().is_none())
        .filter(|i| {
            pods.iter()
                .find(|p| p.name_any() == i.name)
                .is_some_and(|p| promoting || !crate::children::pod_ready(p))
        })
        .map(|i| i.name.clone())
        .collect()
}

/// Polls every pod that has an IP, those named in `brief` with
/// [`BRIEF_POLL_TIMEOUT`], as `access` says ([`crate::instance_api`]);
/// pods that do not answer are absent from the result (their role is then
/// unknown).
pub async fn poll_instances(
    access: &ClusterAccess,
    pods: &[Pod],
    brief: &[String],
    metrics: &Metrics,
) -> BTreeMap<String, InstanceReport> {
    let polls = pods.iter().filter_map(|pod| {
        let name = pod.name_any();
        let timeout = if brief.contains(&name) {
            BRIEF_POLL_TIMEOUT
        } else {
            POLL_TIMEOUT
        };
        let ip = pod.status.as_ref()?.pod_ip.clone()?;
        Some(async move {
            let started = Instant::now();
            let request = match access.request(pod, &ip, DEFAULT_HTTP_PORT, STATUS_PATH) {
                Ok(request) => request,
                Err(why) => {
                    tracing::warn!(instance = %name, %why, "instance manager not asked");
                    return None;
                }
            };
            let report = async {
                request
                    .timeout(timeout)
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

/// How long `tusk plan` waits for a report through the API server (which
/// adds a hop, and may retry a pod that does not answer).
const PROXY_POLL_TIMEOUT: Duration = Duration::from_secs(5);

/// Each pod's report read through the API server's pod proxy
/// (`GET pods/proxy`, `https:` for a pod serving HTTPS), for `tusk plan`,
/// which cannot reach pod addresses: the reports, and for each pod that
/// gave none, why. Pods without an address are not asked, as the operator
/// does not ask them. `token` is one the cluster's authority signed, when
/// the planner could read it (a pod serving HTTPS refuses `/status`
/// without); the API server does not verify the pod's certificate, as
/// kube-apiserver does not.
pub async fn poll_through_api(
    client: &kube::Client,
    pods: &[Pod],
    token: Result<&str, &str>,
) -> (BTreeMap<String, InstanceReport>, Vec<(String, String)>) {
    let polls = pods.iter().filter_map(|pod| {
        pod.status.as_ref()?.pod_ip.as_ref()?;
        let (name, namespace) = (pod.name_any(), pod.namespace().unwrap_or_default());
        let https = crate::instance_api::served_over_https(pod);
        Some(async move {
            let scheme = if https { "https:" } else { "" };
            let path = format!(
                "/api/v1/namespaces/{namespace}/pods/{scheme}{name}:{DEFAULT_HTTP_PORT}/proxy{STATUS_PATH}"
            );
            let mut request = http::Request::get(&path);
            if https {
                match token {
                    Ok(token) => request = request.header(TOKEN_HEADER, token),
                    Err(why) => return (name, Err(why.to_owned())),
                }
            }
            let answer = match request.body(Vec::new()) {
                Ok(request) => tokio::time::timeout(PROXY_POLL_TIMEOUT, client.request(request))
                    .await
                    .map_err(|_| format!("no answer within {} s", PROXY_POLL_TIMEOUT.as_secs()))
                    .and_then(|answer| answer.map_err(|error| error.to_string())),
                Err(error) => Err(error.to_string()),
            };
            (name, answer)
        })
    });
    let mut reports = BTreeMap::new();
    let mut silent = Vec::new();
    for (name, answer) in join_all(polls).await {
        match answer {
            Ok(report) => {
                reports.insert(name, report);
            }
            Err(why) => silent.push((name, why)),
        }
    }
    (reports, silent)
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

    fn status(roles: &[(&str, &str)]) -> PostgresClusterStatus {
        let instances: Vec<_> = roles
            .iter()
            .map(|(name, role)| serde_json::json!({"name": name, "role": role, "ready": false}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "currentPrimary": "db-1", "targetPrimary": "db-1", "instances": instances
        }))
        .expect("status")
    }

    #[test]
    fn only_silent_unready_instances_are_polled_briefly() {
        let status = status(&[
            ("db-1", "unknown"),
            ("db-2", "unknown"),
            ("db-3", "replica"),
        ]);
        let pods = [pod("db-1", false), pod("db-2", true), pod("db-3", false)];
        // db-2 is ready (it will answer), db-3 answered last time.
        assert_eq!(poll_briefly(Some(&status), &pods), ["db-1"]);
        let ready = [pod("db-1", true), pod("db-2", true), pod("db-3", true)];
        assert!(poll_briefly(Some(&status), &ready).is_empty());
        // A new cluster, or an instance without a pod: the full timeout.
        assert!(poll_briefly(None, &pods).is_empty());
        assert!(poll_briefly(Some(&status), &[]).is_empty());
    }

    #[test]
    fn during_a_promotion_every_silent_instance_is_polled_briefly() {
        let mut promoting = status(&[
            ("db-1", "unknown"),
            ("db-2", "replica"),
            ("db-3", "unknown"),
        ]);
        promoting.target_primary = Some("db-2".into());
        promoting.current_primary = None;
        // db-1, the hung former primary, still looks ready.
        let ready = [pod("db-1", true), pod("db-2", true), pod("db-3", true)];
        assert_eq!(poll_briefly(Some(&promoting), &ready), ["db-1", "db-3"]);
        promoting.current_primary = Some("db-2".into());
        assert!(poll_briefly(Some(&promoting), &ready).is_empty(), "done");
    }
}
