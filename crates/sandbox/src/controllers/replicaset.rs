//! The ReplicaSet controller (`pkg/controller/replicaset`): each
//! ReplicaSet keeps `spec.replicas` active pods made from its template,
//! named `<replicaset>-<5 random characters>` and owned by it (controller
//! reference). A pod that fails, succeeds or is being deleted no longer
//! counts, so a replacement is made; surplus pods go in Kubernetes' order
//! (unscheduled, pending and not-ready pods before running, ready ones;
//! the newest first).
//!
//! Between a write and the watch event that shows it, the cache is behind:
//! like kube-controller-manager's expectations, a ReplicaSet is not synced
//! again until the pods it created appear and the ones it deleted go (or a
//! few seconds pass), so no pod is made twice.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::informer::Informer;

/// How long a ReplicaSet waits for the cache to show its own writes.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
#[error("cannot {what} for ReplicaSet {namespace}/{name}: {source}")]
pub struct ReplicaSetError {
    what: &'static str,
    namespace: String,
    name: String,
    source: kube::Error,
}

/// Pods a ReplicaSet created or deleted that the cache has not shown yet.
struct Expectation {
    since: Instant,
    created: Vec<String>,
    deleted: Vec<String>,
}

impl Expectation {
    fn satisfied(&self, pods: &[&Pod]) -> bool {
        let created = self
            .created
            .iter()
            .all(|name| pods.iter().any(|p| p.name_any() == *name));
        let deleted = self.deleted.iter().all(|uid| {
            pods.iter()
                .all(|p| p.uid().as_deref() != Some(uid.as_str()) || !is_active(p))
        });
        (created && deleted) || self.since.elapsed() > EXPECTATION_TIMEOUT
    }
}

fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(
        condition
            .last_transition_time
            .as_ref()
            .map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0),
    )
}

/// The order surplus pods are deleted in: the first goes first.
fn deletion_rank(pod: &Pod) -> impl Ord {
    let assigned = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some();
    let phase = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") => 0,
        Some("Running") => 2,
        _ => 1,
    };
    let ready = ready_since(pod).is_some();
    let created = pod.creation_timestamp().map(|t| t.0);
    (assigned, phase, ready, std::cmp::Reverse(created))
}

/// The pods to delete when `surplus` too many are active.
pub fn surplus_pods<'a>(active: &[&'a Pod], surplus: usize) -> Vec<&'a Pod> {
    let mut ranked: Vec<&Pod> = active.to_vec();
    ranked.sort_by_key(|p| deletion_rank(p));
    ranked.into_iter().take(surplus).collect()
}

fn pod_for(rs: &ReplicaSet) -> Result<Pod, serde_json::Error> {
    let template = rs.spec.as_ref().and_then(|s| s.template.as_ref());
    let meta = template.and_then(|t| t.metadata.as_ref());
    serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{}-", rs.name_any()),
            "namespace": rs.namespace(),
            "labels": meta.and_then(|m| m.labels.clone()),
            "annotations": meta.and_then(|m| m.annotations.clone()),
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": rs.name_any(), "uid": rs.uid(),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": template.and_then(|t| t.spec.clone()),
    }))
}

/// The status the ReplicaSet should have with these active pods.
fn status_of(rs: &ReplicaSet, active: &[&Pod]) -> serde_json::Value {
    let min_ready = rs
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let now = jiff::Timestamp::now();
    let labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref()?.metadata.as_ref()?.labels.clone())
        .unwrap_or_default();
    let fully_labeled = active
        .iter()
        .filter(|p| labels.iter().all(|(k, v)| p.labels().get(k) == Some(v)))
        .count();
    let ready: Vec<jiff::Timestamp> = active.iter().filter_map(|p| ready_since(p)).collect();
    let available = ready
        .iter()
        .filter(|since| since.as_second() + i64::from(min_ready) <= now.as_second())
        .count();
    json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready.len(),
        "availableReplicas": available,
        "observedGeneration": rs.metadata.generation,
    })
}

/// One pass over one ReplicaSet; returns what the cache must show before
/// the next.
async fn sync(
    client: &Client,
    rs: &ReplicaSet,
    pods: &[&Pod],
) -> Result<Option<Expectation>, ReplicaSetError> {
    let namespace = rs.namespace().unwrap_or_default();
    let error = |what| {
        let (namespace, name) = (namespace.clone(), rs.name_any());
        move |source| ReplicaSetError {
            what,
            namespace,
            name,
            source,
        }
    };
    let active: Vec<&Pod> = pods.iter().copied().filter(|p| is_active(p)).collect();
    let wanted =
        usize::try_from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)).unwrap_or(0);
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let mut expectation = Expectation {
        since: Instant::now(),
        created: Vec::new(),
        deleted: Vec::new(),
    };
    if rs.metadata.deletion_timestamp.is_none() && active.len() < wanted {
        let pod = pod_for(rs).map_err(|e| error("make a pod")(kube::Error::SerdeError(e)))?;
        for _ in active.len()..wanted {
            let created = api
                .create(&PostParams::default(), &pod)
                .await
                .map_err(error("create a pod"))?;
            expectation.created.push(created.name_any());
        }
    }
    for pod in surplus_pods(&active, active.len().saturating_sub(wanted)) {
        match api.delete(&pod.name_any(), &DeleteParams::default()).await {
            Ok(_) => expectation.deleted.push(pod.uid().unwrap_or_default()),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => return Err(error("delete a pod")(source)),
        }
    }
    let status = status_of(rs, &active);
    let current = rs
        .status
        .as_ref()
        .map(|s| serde_json::to_value(s).unwrap_or_default());
    let unchanged = current.as_ref().is_some_and(|c| {
        status
            .as_object()
            .into_iter()
            .flatten()
            .all(|(k, v)| c.get(k).unwrap_or(&json!(0)) == v)
    });
    if !unchanged {
        Api::<ReplicaSet>::namespaced(client.clone(), &namespace)
            .patch_status(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            .map_err(error("write the status"))?;
    }
    let waiting = !(expectation.created.is_empty() && expectation.deleted.is_empty());
    Ok(waiting.then_some(expectation))
}

/// Runs the controller until the task is dropped.
pub async fn run(client: Client) {
    let sets = Informer::start(Api::<ReplicaSet>::all(client.clone()));
    let pods = Informer::start(Api::<Pod>::all(client.clone()));
    let mut changes = [sets.changes.clone(), pods.changes.clone()];
    if sets.store.wait_until_ready().await.is_err() || pods.store.wait_until_ready().await.is_err()
    {
        return;
    }
    let mut expectations: HashMap<String, Expectation> = HashMap::new();
    loop {
        let all_pods: Vec<Arc<Pod>> = pods.store.state();
        for rs in sets.store.state() {
            let uid = rs.uid().unwrap_or_default();
            let owned: Vec<&Pod> = all_pods
                .iter()
                .map(AsRef::as_ref)
                .filter(|p| p.namespace() == rs.namespace())
                .filter(|p| {
                    p.owner_references()
                        .iter()
                        .any(|o| o.controller == Some(true) && o.uid == uid)
                })
                .collect();
            if expectations.get(&uid).is_some_and(|e| !e.satisfied(&owned)) {
                continue;
            }
            expectations.remove(&uid);
            match sync(&client, &rs, &owned).await {
                Ok(Some(expectation)) => {
                    expectations.insert(uid, expectation);
                }
                Ok(None) => {}
                Err(error) => tracing::debug!(%error, "cannot sync replica set; retrying"),
            }
        }
        let [a, b] = &mut changes;
        tokio::select! {
            _ = a.changed() => {}
            _ = b.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, phase: &str, ready: bool, created: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": "sandbox", "containers": []},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .expect("pod")
    }

    #[test]
    fn surplus_pods_go_not_ready_and_newest_first() {
        let old_ready = pod("a", "Running", true, "2026-01-01T00:00:00Z");
        let new_ready = pod("b", "Running", true, "2026-01-02T00:00:00Z");
        let pending = pod("c", "Pending", false, "2026-01-01T00:00:00Z");
        let active = [&old_ready, &new_ready, &pending];
        let names = |pods: Vec<&Pod>| pods.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(names(surplus_pods(&active, 1)), vec!["c"]);
        assert_eq!(names(surplus_pods(&active, 2)), vec!["c", "b"]);
    }

    #[test]
    fn failed_and_deleted_pods_do_not_count() {
        let failed = pod("a", "Failed", false, "2026-01-01T00:00:00Z");
        let mut deleting = pod("b", "Running", true, "2026-01-01T00:00:00Z");
        deleting.metadata.deletion_timestamp = deleting.metadata.creation_timestamp.clone();
        assert!(!is_active(&failed));
        assert!(!is_active(&deleting));
        assert!(is_active(&pod(
            "c",
            "Running",
            false,
            "2026-01-01T00:00:00Z"
        )));
    }
}
