//! A Deployment's status from its ReplicaSets (`sync.go`'s
//! `calculateStatus` and `progress.go`'s `syncRolloutStatus`): the replica
//! counts, `Available` (at least `replicas - maxUnavailable` pods
//! available) and `Progressing` (new ReplicaSet created, progressing,
//! complete, or past `progressDeadlineSeconds`), which is what `kubectl
//! rollout status` reads.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
const COMPLETE: &str = "NewReplicaSetAvailable";

/// What this sync saw and did, besides the ReplicaSets themselves.
pub struct Observed<'a> {
    /// The ReplicaSet of the current template, if it exists.
    pub new: Option<&'a ReplicaSet>,
    /// Every ReplicaSet the Deployment owns, the new one included.
    pub all: &'a [&'a ReplicaSet],
    pub max_unavailable: i32,
    /// The new ReplicaSet was created by this sync.
    pub created_new: bool,
    pub now: jiff::Timestamp,
}

fn counts(sets: &[&ReplicaSet], field: fn(&ReplicaSet) -> Option<i32>) -> i32 {
    sets.iter().map(|rs| field(rs).unwrap_or(0)).sum()
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: jiff::Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Sets a condition, keeping its transition time when the status stays.
fn set_condition(conditions: &mut Vec<DeploymentCondition>, mut wanted: DeploymentCondition) {
    if let Some(current) = conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        if current.status == wanted.status && current.reason == wanted.reason {
            wanted.last_transition_time = current.last_transition_time.clone();
            if current.message == wanted.message && wanted.type_ == "Available" {
                wanted.last_update_time = current.last_update_time.clone();
            }
        } else if current.status == wanted.status {
            wanted.last_transition_time = current.last_transition_time.clone();
        }
        *current = wanted;
    } else {
        conditions.push(wanted);
    }
}

fn replicas_of(deployment: &Deployment) -> i32 {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
}

/// The counts part of the status.
fn counted(deployment: &Deployment, observed: &Observed<'_>) -> DeploymentStatus {
    let all = observed.all;
    let replicas = replicas_of(deployment);
    let available = counts(all, |rs| rs.status.as_ref()?.available_replicas);
    let previous = deployment.status.clone().unwrap_or_default();
    DeploymentStatus {
        observed_generation: deployment.metadata.generation,
        replicas: Some(counts(all, |rs| rs.status.as_ref().map(|s| s.replicas))),
        updated_replicas: Some(
            observed
                .new
                .and_then(|rs| rs.status.as_ref())
                .map_or(0, |s| s.replicas),
        ),
        ready_replicas: Some(counts(all, |rs| rs.status.as_ref()?.ready_replicas)),
        available_replicas: Some(available),
        unavailable_replicas: Some((replicas - available).max(0)),
        collision_count: previous.collision_count,
        conditions: previous.conditions,
        terminating_replicas: None,
    }
}

/// Whether this status shows more progress than the last one
/// (`DeploymentProgressing`).
fn progressed(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

fn complete(replicas: i32, status: &DeploymentStatus) -> bool {
    status.updated_replicas == Some(replicas)
        && status.replicas == Some(replicas)
        && status.available_replicas == Some(replicas)
}

fn timed_out(
    deadline: Option<i32>,
    conditions: &[DeploymentCondition],
    now: jiff::Timestamp,
) -> bool {
    let Some(deadline) = deadline else {
        return false;
    };
    let Some(current) = conditions.iter().find(|c| c.type_ == "Progressing") else {
        return false;
    };
    match current.reason.as_deref() {
        Some(TIMED_OUT) => true,
        Some(COMPLETE) => false,
        _ => current
            .last_update_time
            .as_ref()
            .is_some_and(|since| now.as_second() > since.0.as_second() + i64::from(deadline)),
    }
}

/// The status a Deployment should have now.
pub fn status(deployment: &Deployment, observed: &Observed<'_>) -> DeploymentStatus {
    let replicas = replicas_of(deployment);
    let old = deployment.status.clone().unwrap_or_default();
    let mut status = counted(deployment, observed);
    let now = observed.now;
    let mut conditions = status.conditions.take().unwrap_or_default();
    let available = status.available_replicas.unwrap_or(0) >= replicas - observed.max_unavailable;
    set_condition(
        &mut conditions,
        if available {
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                now,
            )
        } else {
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                now,
            )
        },
    );
    let deadline = deployment
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds);
    let name = observed.new.map(ResourceExt::name_any).unwrap_or_default();
    let progressing = conditions.iter().find(|c| c.type_ == "Progressing");
    let already_complete = status.replicas == status.updated_replicas
        && progressing.is_some_and(|c| c.reason.as_deref() == Some(COMPLETE));
    let progress = if observed.created_new {
        Some(condition(
            "Progressing",
            "True",
            "NewReplicaSetCreated",
            format!("Created new replica set \"{name}\""),
            now,
        ))
    } else if observed.new.is_none() || already_complete {
        None
    } else if complete(replicas, &status) {
        Some(condition(
            "Progressing",
            "True",
            COMPLETE,
            format!("ReplicaSet \"{name}\" has successfully progressed."),
            now,
        ))
    } else if progressed(&old, &status) || progressing.is_none() {
        Some(condition(
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{name}\" is progressing."),
            now,
        ))
    } else if timed_out(deadline, &conditions, now) {
        Some(condition(
            "Progressing",
            "False",
            TIMED_OUT,
            format!("ReplicaSet \"{name}\" has timed out progressing."),
            now,
        ))
    } else {
        None
    };
    if let Some(progress) = progress {
        set_condition(&mut conditions, progress);
    }
    status.conditions = Some(conditions);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 1, "progressDeadlineSeconds": 600, "selector": {},
                     "template": {}},
            "status": status,
        }))
        .expect("deployment")
    }

    fn replica_set(replicas: i32, ready: i32, available: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abc"},
            "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": available}
        }))
        .expect("replica set")
    }

    fn reason(status: &DeploymentStatus, type_: &str) -> Option<String> {
        status
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == type_)?
            .reason
            .clone()
    }

    #[test]
    fn a_rollout_moves_from_created_to_progressing_to_complete() {
        let now = jiff::Timestamp::now();
        let new = replica_set(1, 0, 0);
        let all = [&new];
        let observed = |new, created_new| Observed {
            new: Some(new),
            all: &all,
            max_unavailable: 0,
            created_new,
            now,
        };
        let first = status(&deployment(json!({})), &observed(&new, true));
        assert_eq!(
            reason(&first, "Progressing").as_deref(),
            Some("NewReplicaSetCreated")
        );
        assert_eq!(
            reason(&first, "Available").as_deref(),
            Some("MinimumReplicasUnavailable")
        );
        assert_eq!(first.observed_generation, Some(2));
        let ready = replica_set(1, 1, 1);
        let all = [&ready];
        let observed = Observed {
            new: Some(&ready),
            all: &all,
            max_unavailable: 0,
            created_new: false,
            now,
        };
        let done = status(
            &deployment(serde_json::to_value(&first).expect("json")),
            &observed,
        );
        assert_eq!(reason(&done, "Progressing").as_deref(), Some(COMPLETE));
        assert_eq!(
            reason(&done, "Available").as_deref(),
            Some("MinimumReplicasAvailable")
        );
        assert_eq!(
            (done.updated_replicas, done.available_replicas),
            (Some(1), Some(1))
        );
    }

    #[test]
    fn no_progress_past_the_deadline_times_out() {
        let long_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3600);
        let stuck = json!({"replicas": 1, "updatedReplicas": 1, "conditions": [
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
             "lastUpdateTime": long_ago.to_string(), "lastTransitionTime": long_ago.to_string()}]});
        let new = replica_set(1, 0, 0);
        let all = [&new];
        let observed = Observed {
            new: Some(&new),
            all: &all,
            max_unavailable: 0,
            created_new: false,
            now: jiff::Timestamp::now(),
        };
        let status = status(&deployment(stuck), &observed);
        let progressing = status
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == "Progressing"))
            .expect("condition");
        assert_eq!(progressing.status, "False");
        assert_eq!(progressing.reason.as_deref(), Some(TIMED_OUT));
    }
}
