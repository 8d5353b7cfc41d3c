//! Planned switchover (R25): a person asks, with `tusk promote` or the
//! `tusk.dev/promote` annotation, for a standby to become the primary.
//!
//! The operator only moves `status.targetPrimary`; the instance managers
//! do the rest in an order that loses no acknowledged write: the former
//! primary sees it is no longer the target and shuts down cleanly (a fast
//! shutdown sends all its WAL to the connected standbys before it exits),
//! the target waits for its WAL receiver to stop (so that WAL is in), then
//! promotes, and the former primary rewinds if needed and follows it.
//!
//! A request is acted on once and then removed from the cluster, whether
//! it was carried out or refused (with an event saying why), so it never
//! fires again later, after a failover moved the primary elsewhere. An
//! approval of a blocked failover quotes the decision's identity
//! (`status.failover.blocked.id`): it approves that decision and no other.

use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use tusk_api::conditions::{FAILOVER_BLOCKED, find_condition};
use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::labels;
use tusk_api::v1alpha1::{PostgresCluster, PostgresClusterStatus};

/// What to do about a switchover request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Make this instance the target primary.
    Start { to: String },
    /// The requested instance is the primary already: just clear the request.
    Done,
    /// Not now, and why (the request is cleared; ask again).
    Refuse { reason: String },
}

/// Judges a request for `requested` while `primary` is the target primary.
/// `primary_serving` is true when the primary is available and current;
/// `reports` are the instance managers' answers of this reconcile;
/// `being_deleted` the instances whose pods are being deleted.
pub fn evaluate(
    requested: &str,
    primary: &str,
    primary_serving: bool,
    reports: &std::collections::BTreeMap<String, InstanceReport>,
    being_deleted: &[String],
) -> Request {
    if requested == primary {
        return Request::Done;
    }
    if !primary_serving {
        return Request::Refuse {
            reason: format!(
                "the primary {primary} is not serving; a failover, not a switchover, replaces it"
            ),
        };
    }
    if being_deleted.iter().any(|d| d == requested) {
        return Request::Refuse {
            reason: format!("the pod of {requested} is being deleted"),
        };
    }
    let Some(report) = reports.get(requested) else {
        return Request::Refuse {
            reason: format!("{requested} is not an instance of this cluster that answers"),
        };
    };
    if report.fenced {
        return Request::Refuse {
            reason: format!("{requested} is fenced"),
        };
    }
    if report.role != InstanceRole::Replica || !report.ready {
        return Request::Refuse {
            reason: format!(
                "{requested} is not a ready, streaming standby (role {:?}, ready {})",
                report.role, report.ready
            ),
        };
    }
    Request::Start {
        to: requested.to_owned(),
    }
}

/// What a person's request to make `instance` the primary becomes: the
/// annotation to write, or why the request makes no sense now.
#[derive(Debug, PartialEq, Eq)]
pub enum Ask {
    /// Write this annotation with this value (`tusk.dev/promote` with the
    /// instance for a switchover, `tusk.dev/approve-data-loss` with the
    /// blocked decision's identity to approve it).
    Annotate(&'static str, String),
    AlreadyPrimary,
    Refuse(String),
}

/// Judges a request to promote `instance` of `cluster`; with
/// `accept_data_loss` it approves a failover that `dataDurability:
/// required` blocked.
pub fn ask(
    cluster: &str,
    instance: &str,
    accept_data_loss: bool,
    status: &PostgresClusterStatus,
) -> Ask {
    if !status.instances.iter().any(|i| i.name == instance) {
        let known: Vec<&str> = status.instances.iter().map(|i| i.name.as_str()).collect();
        return Ask::Refuse(format!(
            "{instance} is not an instance of {cluster} (instances: {})",
            if known.is_empty() {
                "none yet".to_owned()
            } else {
                known.join(", ")
            }
        ));
    }
    let blocked = status.failover.as_ref().and_then(|f| f.blocked.as_ref());
    let blocked_condition =
        find_condition(&status.conditions, FAILOVER_BLOCKED).is_some_and(|c| c.status == "True");
    if accept_data_loss {
        let Some(blocked) = blocked else {
            return Ask::Refuse(format!(
                "no failover of {cluster} is blocked, so there is no data loss to accept; \
                 without --accept-data-loss this is a switchover"
            ));
        };
        if blocked.to != instance {
            return Ask::Refuse(format!(
                "the blocked failover of {cluster} would promote {}, not {instance} \
                 (the most advanced standby; see `kubectl describe pgc {cluster}`)",
                blocked.to
            ));
        }
        return Ask::Annotate(labels::APPROVE_DATA_LOSS, blocked.id.clone());
    }
    if blocked.is_some() || blocked_condition {
        return Ask::Refuse(format!(
            "a failover of {cluster} is blocked: promoting may lose acknowledged commits \
             (see `kubectl describe pgc {cluster}`); add --accept-data-loss to approve it"
        ));
    }
    if status.current_primary.as_deref() == Some(instance)
        && status.target_primary.as_deref() == Some(instance)
    {
        return Ask::AlreadyPrimary;
    }
    Ask::Annotate(labels::PROMOTE, instance.to_owned())
}

/// What became of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requested {
    /// There is no such cluster.
    NoCluster,
    /// Not written, and why.
    Refused(String),
    AlreadyPrimary,
    /// `annotation` was written with `value`; the operator acts on it.
    Annotated(&'static str, String),
}

/// Asks for `instance` to become the primary of `cluster`: judges the
/// request with [`ask`] and writes its annotation.
pub async fn request(
    api: &Api<PostgresCluster>,
    cluster: &str,
    instance: &str,
    accept_data_loss: bool,
) -> Result<Requested, kube::Error> {
    let Some(found) = api.get_opt(cluster).await? else {
        return Ok(Requested::NoCluster);
    };
    let status = found.status.unwrap_or_default();
    let (annotation, value) = match ask(cluster, instance, accept_data_loss, &status) {
        Ask::Refuse(reason) => return Ok(Requested::Refused(reason)),
        Ask::AlreadyPrimary => return Ok(Requested::AlreadyPrimary),
        Ask::Annotate(annotation, value) => (annotation, value),
    };
    let patch = serde_json::json!({"metadata": {"annotations": {annotation: value}}});
    api.patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Requested::Annotated(annotation, value))
}

/// Where a written request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The instance is the target and the current primary.
    Primary,
    /// The operator removed the request without acting on it (its
    /// SwitchoverRefused or ApprovalRejected event says why).
    Refused,
    Pending,
}

/// Where the request `annotation` for `instance` stands in `cluster`.
pub fn progress(cluster: &PostgresCluster, instance: &str, annotation: &str) -> Progress {
    let pending = cluster
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(annotation));
    let status = cluster.status.clone().unwrap_or_default();
    let target = status.target_primary.as_deref() == Some(instance);
    if target && status.current_primary.as_deref() == Some(instance) {
        Progress::Primary
    } else if !pending && !target {
        Progress::Refused
    } else {
        Progress::Pending
    }
}

/// Polls `cluster` until the request is done or refused, at most `limit`;
/// `Pending` when the time ran out.
pub async fn wait(
    api: &Api<PostgresCluster>,
    cluster: &str,
    instance: &str,
    annotation: &str,
    limit: Duration,
) -> Result<Progress, kube::Error> {
    let started = Instant::now();
    while started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let found = api.get(cluster).await?;
        match progress(&found, instance, annotation) {
            Progress::Pending => {}
            done => return Ok(done),
        }
    }
    Ok(Progress::Pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tusk_api::v1alpha1::InstanceStatus;

    fn status(blocked: bool) -> PostgresClusterStatus {
        let mut status: PostgresClusterStatus = serde_json::from_value(serde_json::json!({
            "currentPrimary": "db-1", "targetPrimary": "db-1",
            "instances": [
                {"name": "db-1", "role": "primary", "ready": true},
                {"name": "db-2", "role": "replica", "ready": true}
            ]
        }))
        .expect("status");
        if blocked {
            status.conditions = serde_json::from_value(serde_json::json!([{
                "type": "FailoverBlocked", "status": "True", "reason": "DurabilityAtRisk",
                "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z"
            }]))
            .expect("conditions");
            status.failover = serde_json::from_value(serde_json::json!({"blocked": {
                "id": "4f1c2a9b7e", "from": "db-1", "to": "db-2", "lsnGapBytes": 1024,
                "since": "2026-12-02T10:00:00Z"
            }}))
            .expect("blocked");
        }
        status
    }

    #[test]
    fn a_standby_is_promoted_by_a_switchover_request() {
        assert_eq!(
            ask("db", "db-2", false, &status(false)),
            Ask::Annotate(labels::PROMOTE, "db-2".into())
        );
        assert_eq!(
            ask("db", "db-1", false, &status(false)),
            Ask::AlreadyPrimary
        );
    }

    #[test]
    fn accepting_data_loss_approves_only_a_blocked_failover_by_its_identity() {
        assert_eq!(
            ask("db", "db-2", true, &status(true)),
            Ask::Annotate(labels::APPROVE_DATA_LOSS, "4f1c2a9b7e".into())
        );
        // The blocked decision promotes db-2: approving db-1 approves nothing.
        let Ask::Refuse(reason) = ask("db", "db-1", true, &status(true)) else {
            panic!("refused");
        };
        assert!(reason.contains("would promote db-2, not db-1"), "{reason}");
        let Ask::Refuse(reason) = ask("db", "db-2", true, &status(false)) else {
            panic!("refused");
        };
        assert!(reason.contains("no failover of db is blocked"), "{reason}");
        let Ask::Refuse(reason) = ask("db", "db-2", false, &status(true)) else {
            panic!("refused");
        };
        assert!(reason.contains("--accept-data-loss"), "{reason}");
    }

    #[test]
    fn an_unknown_instance_is_refused_naming_the_instances() {
        let Ask::Refuse(reason) = ask("db", "db-9", false, &status(false)) else {
            panic!("refused");
        };
        assert_eq!(
            reason,
            "db-9 is not an instance of db (instances: db-1, db-2)"
        );
        let empty = PostgresClusterStatus {
            instances: Vec::<InstanceStatus>::new(),
            ..PostgresClusterStatus::default()
        };
        assert!(
            matches!(ask("db", "db-1", false, &empty), Ask::Refuse(r) if r.contains("none yet"))
        );
    }

    #[test]
    fn a_request_is_done_when_the_instance_serves_and_refused_when_dropped() {
        let cluster = |annotated: bool, target: &str, current: &str| -> PostgresCluster {
            let annotations = if annotated {
                serde_json::json!({labels::PROMOTE: "db-2"})
            } else {
                serde_json::json!({})
            };
            serde_json::from_value(serde_json::json!({
                "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                "metadata": {"name": "db", "annotations": annotations},
                "spec": {"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"}},
                "status": {"targetPrimary": target, "currentPrimary": current}
            }))
            .expect("cluster")
        };
        let promote = labels::PROMOTE;
        assert_eq!(
            progress(&cluster(false, "db-2", "db-2"), "db-2", promote),
            Progress::Primary
        );
        assert_eq!(
            progress(&cluster(true, "db-1", "db-1"), "db-2", promote),
            Progress::Pending
        );
        assert_eq!(
            progress(&cluster(false, "db-2", "db-1"), "db-2", promote),
            Progress::Pending
        );
        assert_eq!(
            progress(&cluster(false, "db-1", "db-1"), "db-2", promote),
            Progress::Refused
        );
        // An approval removed without moving the target was rejected.
        let approve = labels::APPROVE_DATA_LOSS;
        assert_eq!(
            progress(&cluster(false, "db-1", "db-1"), "db-2", approve),
            Progress::Refused
        );
        assert_eq!(
            progress(&cluster(false, "db-2", "db-1"), "db-2", approve),
            Progress::Pending
        );
    }
    use std::collections::BTreeMap;
    use tusk_api::instance::InstancePhase;

    fn report(name: &str, role: InstanceRole, ready: bool) -> InstanceReport {
        let mut report: InstanceReport = serde_json::from_value(serde_json::json!({
            "name": name, "role": "replica", "phase": "running", "ready": ready, "fenced": false
        }))
        .expect("report");
        report.role = role;
        report.phase = InstancePhase::Running;
        report
    }

    fn reports() -> BTreeMap<String, InstanceReport> {
        [
            report("db-1", InstanceRole::Primary, true),
            report("db-2", InstanceRole::Replica, true),
            report("db-3", InstanceRole::Replica, false),
        ]
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect()
    }

    #[test]
    fn a_ready_standby_becomes_the_target() {
        assert_eq!(
            evaluate("db-2", "db-1", true, &reports(), &[]),
            Request::Start { to: "db-2".into() }
        );
    }

    #[test]
    fn asking_for_the_current_primary_only_clears_the_request() {
        assert_eq!(
            evaluate("db-1", "db-1", true, &reports(), &[]),
            Request::Done
        );
    }

    #[test]
    fn a_standby_that_cannot_take_over_is_refused_with_the_reason() {
        let refused = |requested: &str, serving: bool| match evaluate(
            requested,
            "db-1",
            serving,
            &reports(),
            &[],
        ) {
            Request::Refuse { reason } => reason,
            other => panic!("{requested}: {other:?}"),
        };
        assert!(refused("db-3", true).contains("not a ready, streaming standby"));
        assert!(refused("db-9", true).contains("db-9 is not an instance"));
        assert!(refused("db-2", false).contains("not serving"));
        let mut fenced = reports();
        if let Some(r) = fenced.get_mut("db-2") {
            r.fenced = true;
        }
        assert!(matches!(
            evaluate("db-2", "db-1", true, &fenced, &[]),
            Request::Refuse { reason } if reason.contains("fenced")
        ));
        assert!(matches!(
            evaluate("db-2", "db-1", true, &reports(), &["db-2".to_owned()]),
            Request::Refuse { reason } if reason.contains("being deleted")
        ));
    }
}
