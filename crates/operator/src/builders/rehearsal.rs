//! The restore rehearsal's pod and scratch volume (see
//! [`crate::rehearsal`]): the instance pod's image, security context,
//! credentials and repository keys, running `tusk instance rehearse` once
//! (`restartPolicy: Never`) on a volume of the cluster's storage size and
//! class. Labelled only [`labels::REHEARSAL`], never [`labels::CLUSTER`]:
//! no Service, disruption budget or instance count selects them. Owned by
//! the cluster, so deleting it removes a rehearsal under way.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, PersistentVolumeClaim, Pod};
use tusk_api::labels;
use tusk_api::rehearsal::{RESULT_ENV, TERMINATION_MESSAGE_PATH, pod_name};

use super::container::value_env;
use super::pod::template_pod;
use super::storage::instance_pvc;
use super::{CONTROLLER_DIR, child_meta};
use crate::config::OperatorConfig;
use crate::names::InstanceName;
use crate::validate::ValidatedCluster;

/// Labels of the rehearsal's objects.
fn rehearsal_labels(cluster: &ValidatedCluster) -> BTreeMap<String, String> {
    one_shot_labels(labels::REHEARSAL, cluster)
}

/// The rehearsal's pod.
pub fn rehearsal_pod(cluster: &ValidatedCluster, config: &OperatorConfig) -> Pod {
    let name = pod_name(cluster.name.as_str());
    let mut pod = template_pod(cluster, config, &InstanceName::recorded(&name));
    one_shot(
        &mut pod,
        child_meta(cluster, &name),
        rehearsal_labels(cluster),
        "rehearse",
        RESULT_ENV,
    );
    pod
}

/// The labels of a one-shot pod of `cluster`: `key` names the cluster,
/// never [`labels::CLUSTER`], so no Service, disruption budget or instance
/// count selects it.
pub(super) fn one_shot_labels(key: &str, cluster: &ValidatedCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (key.to_owned(), cluster.name.to_string()),
        (
            labels::MANAGED_BY.to_owned(),
            labels::MANAGED_BY_VALUE.to_owned(),
        ),
    ])
}

/// Makes an instance's `pod` a pod that runs `tusk instance <command>`
/// once (`restartPolicy: Never`), named and labelled by `metadata` and
/// `own_labels` (besides the owner's template labels), serving no one, and
/// reporting its outcome through the termination message file named in
/// `result_env`.
pub(super) fn one_shot(
    pod: &mut Pod,
    mut metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    own_labels: BTreeMap<String, String>,
    command: &str,
    result_env: &str,
) {
    let mut pod_labels: BTreeMap<String, String> = pod
        .metadata
        .labels
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| !key.starts_with("tusk.dev/"))
        .collect();
    pod_labels.extend(own_labels);
    metadata.labels = Some(pod_labels);
    metadata.annotations = pod.metadata.annotations.take();
    pod.metadata = metadata;
    if let Some(spec) = pod.spec.as_mut() {
        spec.restart_policy = Some("Never".to_owned());
        for container in &mut spec.containers {
            container.command = Some(vec![
                format!("{CONTROLLER_DIR}/tusk"),
                "instance".to_owned(),
                command.to_owned(),
            ]);
            container.startup_probe = None;
            container.liveness_probe = None;
            container.readiness_probe = None;
            container.ports = None;
            container.termination_message_path = Some(TERMINATION_MESSAGE_PATH.to_owned());
            // A crash before the outcome is written shows the log's end.
            container.termination_message_policy = Some("FallbackToLogsOnError".to_owned());
            let env: &mut Vec<EnvVar> = container.env.get_or_insert_with(Vec::new);
            env.push(value_env(result_env, TERMINATION_MESSAGE_PATH.to_owned()));
        }
    }
}

/// The rehearsal's scratch volume: the cluster's size and class.
pub fn rehearsal_pvc(cluster: &ValidatedCluster) -> PersistentVolumeClaim {
    let name = pod_name(cluster.name.as_str());
    let mut pvc = instance_pvc(cluster, &InstanceName::recorded(&name));
    let mut metadata = child_meta(cluster, &name);
    metadata.labels = Some(rehearsal_labels(cluster));
    pvc.metadata = metadata;
    pvc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{claim_names, validated};

    fn cluster() -> ValidatedCluster {
        validated(serde_json::json!({
            "instances": 3, "postgres": {"version": 15},
            "storage": {"size": "2Gi"},
            "podTemplate": {"labels": {"team": "orders"}}
        }))
    }

    #[test]
    fn the_rehearsal_pod_runs_once_serves_no_one_and_reports_through_its_termination_message() {
        let cluster = cluster();
        let pod = rehearsal_pod(&cluster, &OperatorConfig::default());
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(pod.metadata.name.as_deref(), Some("orders-rehearsal"));
        assert_eq!(
            labels.get(labels::REHEARSAL).map(String::as_str),
            Some("orders")
        );
        assert!(!labels.contains_key(labels::CLUSTER), "{labels:?}");
        assert!(!labels.contains_key(labels::INSTANCE), "{labels:?}");
        assert_eq!(labels.get("team").map(String::as_str), Some("orders"));
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let container = &spec.containers[0];
        assert_eq!(container.command.as_ref().expect("command")[2], "rehearse");
        assert!(container.readiness_probe.is_none() && container.ports.is_none());
        assert_eq!(claim_names(&spec), ["orders-rehearsal"]);
        let result = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == RESULT_ENV)
            .and_then(|e| e.value.as_deref());
        assert_eq!(result, Some(TERMINATION_MESSAGE_PATH));
    }

    #[test]
    fn the_scratch_volume_has_the_clusters_size_and_no_cluster_label() {
        let cluster = cluster();
        let pvc = rehearsal_pvc(&cluster);
        let labels = pvc.metadata.labels.clone().expect("labels");
        assert!(!labels.contains_key(labels::CLUSTER) && !labels.contains_key(labels::CLUSTER_UID));
        assert_eq!(
            pvc.metadata.owner_references,
            Some(vec![cluster.owner.clone()])
        );
        let size = pvc
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .expect("size");
        assert_eq!(size["storage"].0, "2Gi");
    }
}
