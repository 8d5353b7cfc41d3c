//! `tusk why CLUSTER`: why a cluster is not Ready, as a chain of reasons:
//! its phase, the conditions that say something is wrong (with reason and
//! message), fenced and unready instances (and why a pod waits for a
//! node, in the scheduler's words), declared roles the primary could not
//! bring to their declaration (`status.roles`), then the cluster's recent
//! Warning events, newest first. Prints `Ready` when it is Ready and every
//! declared role is as declared.
//!
//! Exit codes: 0 Ready, 1 not Ready (the reasons are printed), 2 the
//! command could not run.

use std::process::ExitCode;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use tusk_api::conditions;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster, RoleState};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on};
use super::status::{report, time_text};
use crate::output::Lines;

/// Warning events shown at most.
const EVENTS_SHOWN: usize = 10;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
}

/// A Warning event about the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub time: Option<Time>,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        let cluster = target.cluster(&args.at.cluster).await?;
        let pods = target.pods(&args.at.cluster).await?;
        let events = target.events().await?;
        let warnings = warnings_about(&cluster, &events);
        let chain = reasons(&cluster, &pods, &warnings);
        // The exit code is the verdict, read or not.
        let mut lines = Lines::default();
        if chain.is_empty() {
            lines.line(format_args!("Ready"))?;
            return Ok(ExitCode::SUCCESS);
        }
        lines.line(format_args!(
            "{}/{} is not Ready:",
            target.namespace, args.at.cluster
        ))?;
        for reason in chain {
            lines.line(format_args!("- {reason}"))?;
        }
        Ok(ExitCode::from(1))
    })
}

/// When an event last happened, by whichever field its writer filled.
fn event_time(event: &Event) -> Option<Time> {
    event
        .last_timestamp
        .clone()
        .or_else(|| event.event_time.as_ref().map(|t| Time(t.0)))
        .or_else(|| event.first_timestamp.clone())
        .or_else(|| event.metadata.creation_timestamp.clone())
}

/// The Warning events whose object is `cluster`, newest first.
pub fn warnings_about(cluster: &PostgresCluster, events: &[Event]) -> Vec<Warning> {
    let name = cluster.name_any();
    let mut warnings: Vec<Warning> = events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("PostgresCluster")
                && e.involved_object.name.as_deref() == Some(name.as_str())
        })
        .map(|e| Warning {
            time: event_time(e),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            count: e
                .count
                .or_else(|| e.series.as_ref().map(|s| s.count.unwrap_or(1)))
                .unwrap_or(1),
        })
        .collect();
    warnings.sort_by(|a, b| b.time.cmp(&a.time));
    warnings
}

/// True for a condition that says something is wrong: one that must be
/// True (`Ready`, `PrimaryAvailable`) and is not, or a problem condition
/// (`Degraded`, `FailoverBlocked`, `Unsupported`) that is True. A type this
/// version does not know counts when its status is `Unknown`.
fn is_wrong(type_: &str, status: &str) -> bool {
    match type_ {
        conditions::READY | conditions::PRIMARY_AVAILABLE => status != "True",
        conditions::DEGRADED | conditions::FAILOVER_BLOCKED | conditions::UNSUPPORTED => {
            status == "True"
        }
        conditions::PROGRESSING => false,
        _ => status == "Unknown",
    }
}

/// The reasons `cluster` is not Ready, most telling first; empty when it is.
pub fn reasons(cluster: &PostgresCluster, pods: &[Pod], warnings: &[Warning]) -> Vec<String> {
    let report = report(cluster, pods);
    let status = cluster.status.clone().unwrap_or_default();
    let ready_condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::READY)
        .is_none_or(|c| c.status == "True");
    let failed_roles: Vec<String> = status
        .roles
        .iter()
        .filter(|r| r.state == RoleState::Failed)
        .map(|r| {
            format!(
                "role {} is not as declared: {}",
                r.name,
                r.reason.as_deref().unwrap_or("(no reason reported)")
            )
        })
        .collect();
    if status.phase == Some(ClusterPhase::Ready) && ready_condition && failed_roles.is_empty() {
        return Vec::new();
    }
    let mut chain = vec![format!(
        "phase {} with {}/{} instances ready",
        report
            .phase
            .as_deref()
            .unwrap_or("(none: the operator has not reported yet)"),
        report.ready_instances,
        report.instances_declared
    )];
    for c in report
        .conditions
        .iter()
        .filter(|c| is_wrong(&c.type_, &c.status))
    {
        chain.push(format!(
            "{}={} {}: {}",
            c.type_, c.status, c.reason, c.message
        ));
    }
    for i in &report.instances {
        if i.fenced {
            chain.push(format!(
                "{} is fenced (annotation {}): its PostgreSQL stays stopped until `tusk unfence {} {}`",
                i.name,
                tusk_api::labels::FENCED_INSTANCES,
                report.cluster,
                i.name
            ));
        } else if let Some(waiting) = &i.unscheduled {
            chain.push(format!(
                "{} ({}) is not ready: its pod waits for a node ({}): {}",
                i.name, i.role, waiting.reason, waiting.message
            ));
        } else if !i.ready || i.pod_ready == Some(false) {
            chain.push(format!(
                "{} ({}) is not ready{}",
                i.name,
                i.role,
                match i.pod_ready {
                    None => "; it has no pod",
                    Some(false) => "; its pod is not Ready",
                    Some(true) => "",
                }
            ));
        }
    }
    chain.extend(failed_roles);
    for w in warnings.iter().take(EVENTS_SHOWN) {
        chain.push(format!(
            "event {} {}: {}{}",
            w.time.as_ref().map(time_text).unwrap_or_default(),
            w.reason,
            w.message,
            if w.count > 1 {
                format!(" (x{})", w.count)
            } else {
                String::new()
            }
        ));
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(phase: &str, ready: &str, fenced: Option<&str>) -> PostgresCluster {
        let mut annotations = serde_json::Map::new();
        if let Some(value) = fenced {
            annotations.insert("tusk.dev/fenced-instances".into(), value.into());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "db", "namespace": "shop", "annotations": annotations},
            "spec": {"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"}},
            "status": {"phase": phase, "readyInstances": 1,
                "conditions": [
                    {"type": "Ready", "status": ready, "reason": "InstancesNotReady",
                     "message": "db-2: not ready", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Progressing", "status": "True", "reason": "Creating",
                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "FailoverBlocked", "status": "False", "reason": "NotBlocked",
                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "PrimaryAvailable", "status": ready, "reason": "PrimaryUnavailable",
                     "message": "db-1 does not answer", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "instances": [{"name": "db-1", "role": "primary", "ready": true},
                              {"name": "db-2", "role": "replica", "ready": false}]}
        }))
        .expect("a cluster")
    }

    fn event(name: &str, kind: &str, type_: &str, reason: &str, time: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}.{reason}")},
            "involvedObject": {"kind": kind, "name": name},
            "type": type_, "reason": reason, "message": format!("{reason} happened"),
            "lastTimestamp": time
        }))
        .expect("an event")
    }

    #[test]
    fn a_ready_cluster_has_no_reasons() {
        assert!(reasons(&cluster("Ready", "True", None), &[], &[]).is_empty());
    }

    #[test]
    fn a_ready_cluster_with_a_failed_role_says_which_and_why() {
        let mut c = cluster("Ready", "True", None);
        let status = c.status.as_mut().expect("status");
        status.roles = serde_json::from_value(serde_json::json!([
            {"name": "web", "state": "Reconciled"},
            {"name": "batch", "state": "Failed", "reason": "Secret batch-pw does not exist"}
        ]))
        .expect("roles");
        let chain = reasons(&c, &[], &[]);
        assert_eq!(
            chain.last().map(String::as_str),
            Some("role batch is not as declared: Secret batch-pw does not exist"),
            "{chain:?}"
        );
        assert!(!chain.iter().any(|r| r.contains("role web")));
    }

    #[test]
    fn the_chain_names_conditions_fencing_and_events_newest_first() {
        let c = cluster("Degraded", "False", Some("db-2"));
        let events = [
            event(
                "db",
                "PostgresCluster",
                "Warning",
                "Old",
                "2026-01-01T00:00:01Z",
            ),
            event(
                "db",
                "PostgresCluster",
                "Normal",
                "Fine",
                "2026-01-01T00:00:09Z",
            ),
            event("db", "Pod", "Warning", "OtherKind", "2026-01-01T00:00:09Z"),
            event(
                "other",
                "PostgresCluster",
                "Warning",
                "OtherCluster",
                "2026-01-01T00:00:09Z",
            ),
            event(
                "db",
                "PostgresCluster",
                "Warning",
                "New",
                "2026-01-01T00:00:05Z",
            ),
        ];
        let warnings = warnings_about(&c, &events);
        let reasons: Vec<&str> = warnings.iter().map(|w| w.reason.as_str()).collect();
        assert_eq!(reasons, ["New", "Old"]);
        let chain = reasons_text(&c, &warnings);
        assert!(
            chain.starts_with("phase Degraded with 1/2 instances ready\n"),
            "{chain}"
        );
        assert!(
            chain.contains("Ready=False InstancesNotReady: db-2: not ready"),
            "{chain}"
        );
        assert!(!chain.contains("Progressing"), "{chain}");
        assert!(!chain.contains("FailoverBlocked"), "{chain}");
        assert!(
            chain.contains("PrimaryAvailable=False PrimaryUnavailable: db-1 does not answer"),
            "{chain}"
        );
        assert!(
            chain.contains("db-2 is fenced (annotation tusk.dev/fenced-instances)"),
            "{chain}"
        );
        let new = chain.find("New happened").expect("new event");
        let old = chain.find("Old happened").expect("old event");
        assert!(new < old, "newest first: {chain}");
    }

    #[test]
    fn an_unready_instance_is_named() {
        let chain = reasons_text(&cluster("Provisioning", "False", None), &[]);
        assert!(
            chain.contains("db-2 (replica) is not ready; it has no pod"),
            "{chain}"
        );
        assert!(!chain.contains("db-1 ("), "{chain}");
    }

    #[test]
    fn an_instance_waiting_for_a_node_is_named_with_the_schedulers_words() {
        let mut c = cluster("Provisioning", "False", None);
        status_of(&mut c).instances[1].unscheduled = Some(tusk_api::v1alpha1::Unscheduled {
            reason: tusk_api::v1alpha1::SchedulingReason::Unschedulable,
            message: "0/0 nodes are available".into(),
        });
        let chain = reasons_text(&c, &[]);
        assert!(
            chain.contains(
                "db-2 (replica) is not ready: its pod waits for a node (Unschedulable): 0/0 nodes are available"
            ),
            "{chain}"
        );
        status_of(&mut c).instances[1].unscheduled = Some(tusk_api::v1alpha1::Unscheduled {
            reason: tusk_api::v1alpha1::SchedulingReason::NotScheduledYet,
            message: "not scheduled yet: no scheduler has looked at the pod".into(),
        });
        let chain = reasons_text(&c, &[]);
        assert!(
            chain.contains("(NotScheduledYet): not scheduled yet"),
            "{chain}"
        );
    }

    fn status_of(c: &mut PostgresCluster) -> &mut tusk_api::v1alpha1::PostgresClusterStatus {
        c.status.as_mut().expect("status")
    }

    fn reasons_text(c: &PostgresCluster, warnings: &[Warning]) -> String {
        reasons(c, &[], warnings).join("\n")
    }
}
