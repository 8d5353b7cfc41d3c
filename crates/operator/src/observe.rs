//! Reading each instance manager's `/status` (DESIGN: instance status comes
//! from the instance managers, polled concurrently with timeouts).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tusk_api::instance::{DEFAULT_HTTP_PORT, InstanceReport, STATUS_PATH};

use crate::metrics::Metrics;

/// How long one instance may take to answer.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(2);

/// Polls every pod that has an IP; pods that do not answer are absent
/// from the result (their role is then unknown).
pub async fn poll_instances(
    http: &reqwest::Client,
    pods: &[Pod],
    metrics: &Metrics,
) -> BTreeMap<String, InstanceReport> {
    let polls = pods.iter().filter_map(|pod| {
        let ip = pod.status.as_ref()?.pod_ip.clone()?;
        let name = pod.name_any();
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
