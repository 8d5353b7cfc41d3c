//! Whether an instance's pod waits for a node, and why: the scheduler's
//! own words when it found no node for the pod (`PodScheduled=False`), or
//! "not scheduled yet" when no scheduler has looked at a pod created a
//! while ago (none runs). Pure: status, events and `tusk why` read it.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tusk_api::v1alpha1::{PostgresClusterStatus, SchedulingReason, Unscheduled};

use crate::note::Note;

/// The pod condition the scheduler sets once it has looked at a pod.
pub const POD_SCHEDULED: &str = "PodScheduled";

/// How long a pod may wait without any scheduler looking at it before it
/// is reported: a running scheduler looks within seconds, even a busy one.
pub const UNSEEN_FOR: SignedDuration = SignedDuration::from_secs(60);

/// Why `pod` is not on a node yet, as of `now`; `None` when it is (or is
/// on its way out, or is too young to tell).
pub fn unscheduled(pod: &Pod, now: Timestamp) -> Option<Unscheduled> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    match scheduled_condition(pod) {
        Some(condition) if condition.status == "False" => Some(refused(condition)),
        Some(_) => None,
        None => unseen(pod, now),
    }
}

/// Whether the scheduler has placed `pod` on a node.
pub fn placed(pod: &Pod) -> bool {
    scheduled_condition(pod).is_some_and(|c| c.status == "True")
}

fn scheduled_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == POD_SCHEDULED))
}

/// A pod the scheduler looked at and placed nowhere: its message, with
/// its reason when that is not the usual `Unschedulable`
/// (`SchedulingGated`, `SchedulerError`).
fn refused(condition: &PodCondition) -> Unscheduled {
    let reason = condition.reason.as_deref().unwrap_or_default();
    let message = condition.message.as_deref().unwrap_or_default();
    let message = match (reason, message) {
        ("" | "Unschedulable", "") => "the scheduler found no node for the pod".to_owned(),
        ("" | "Unschedulable", message) => message.to_owned(),
        (reason, "") => reason.to_owned(),
        (reason, message) => format!("{reason}: {message}"),
    };
    Unscheduled {
        reason: SchedulingReason::Unschedulable,
        message,
    }
}

/// A pod no scheduler has looked at for [`UNSEEN_FOR`] since it was
/// created, and that no node has taken either (a node gives it an
/// address, a Ready condition, container statuses).
fn unseen(pod: &Pod, now: Timestamp) -> Option<Unscheduled> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    let on_a_node = pod.status.as_ref().is_some_and(|s| {
        s.pod_ip.is_some()
            || s.conditions.as_ref().is_some_and(|c| !c.is_empty())
            || s.container_statuses.as_ref().is_some_and(|c| !c.is_empty())
    });
    if on_a_node || now.duration_since(created) < UNSEEN_FOR {
        return None;
    }
    Some(Unscheduled {
        reason: SchedulingReason::NotScheduledYet,
        message: format!(
            "not scheduled yet: no scheduler has looked at the pod since it was created at \
             {created}; is kube-scheduler running?"
        ),
    })
}

/// A Warning for each instance that starts waiting for a node, or waits
/// for another reason than before: once per change of reason, not once
/// per pass nor per change of the scheduler's message (it counts nodes,
/// which come and go).
pub fn notes(previous: Option<&PostgresClusterStatus>, new: &PostgresClusterStatus) -> Vec<Note> {
    let before = |name: &str| {
        previous?
            .instances
            .iter()
            .find(|i| i.name == name)?
            .unscheduled
            .as_ref()
            .map(|u| u.reason)
    };
    new.instances
        .iter()
        .filter_map(|instance| {
            let now = instance.unscheduled.as_ref()?;
            (before(&instance.name) != Some(now.reason)).then(|| {
                Note::warning(
                    now.reason.as_str(),
                    format!("{}: {}", instance.name, now.message),
                )
            })
        })
        .collect()
}

/// `<instance>: <reason>: <message>` for each instance that waits for a
/// node, and the reason the `Ready` condition gives for them
/// (`Unschedulable` before `NotScheduledYet`).
pub fn waiting(status: &PostgresClusterStatus) -> (Option<SchedulingReason>, Vec<String>) {
    let waiting: Vec<(&str, &Unscheduled)> = status
        .instances
        .iter()
        .filter_map(|i| Some((i.name.as_str(), i.unscheduled.as_ref()?)))
        .collect();
    let reason = waiting.iter().map(|(_, u)| u.reason).min();
    let lines = waiting
        .iter()
        .map(|(name, u)| format!("{name}: {}: {}", u.reason, u.message))
        .collect();
    (reason, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a time")
    }

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "db-1", "creationTimestamp": "2026-12-01T10:00:00Z"},
            "status": status,
        }))
        .expect("a pod")
    }

    fn scheduled(status: &str, reason: &str, message: &str) -> Pod {
        pod(json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-01T10:00:01Z",
        }]}))
    }

    #[test]
    fn a_pod_the_scheduler_placed_nowhere_is_reported_in_its_words() {
        let message = "0/3 nodes are available: 3 node(s) had untolerated taint(s).";
        let pending = scheduled("False", "Unschedulable", message);
        assert_eq!(
            unscheduled(&pending, at("2026-12-01T10:00:02Z")),
            Some(Unscheduled {
                reason: SchedulingReason::Unschedulable,
                message: message.to_owned(),
            })
        );
        let gated = scheduled("False", "SchedulingGated", "Scheduling is blocked");
        assert_eq!(
            unscheduled(&gated, at("2026-12-01T10:00:02Z")).map(|u| u.message),
            Some("SchedulingGated: Scheduling is blocked".to_owned())
        );
    }

    #[test]
    fn a_placed_pod_is_not_reported() {
        let placed_pod = scheduled("True", "", "");
        assert!(placed(&placed_pod));
        assert_eq!(unscheduled(&placed_pod, at("2026-12-02T10:00:00Z")), None);
    }

    #[test]
    fn a_pod_no_scheduler_looked_at_is_not_scheduled_yet_after_a_while() {
        let unseen = pod(json!({"phase": "Pending"}));
        assert_eq!(
            unscheduled(&unseen, at("2026-12-01T10:00:30Z")),
            None,
            "a scheduler may not have looked yet"
        );
        let waiting = unscheduled(&unseen, at("2026-12-01T10:01:00Z")).expect("reported");
        assert_eq!(waiting.reason, SchedulingReason::NotScheduledYet);
        assert!(
            waiting.message.starts_with("not scheduled yet: "),
            "{}",
            waiting.message
        );
        // Its creation time, not a count of seconds: the message stays the
        // same from one pass to the next.
        assert_eq!(
            unscheduled(&unseen, at("2026-12-01T11:00:00Z")),
            Some(waiting)
        );
    }

    #[test]
    fn a_pod_a_node_took_is_not_reported_without_a_scheduled_condition() {
        // Pods given to a node by name, or whose status someone else
        // writes, may never carry PodScheduled.
        let running = pod(
            json!({"phase": "Running", "podIP": "10.0.0.7", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:05Z"}
            ]}),
        );
        assert_eq!(unscheduled(&running, at("2026-12-01T11:00:00Z")), None);
    }

    #[test]
    fn a_pod_on_its_way_out_is_not_reported() {
        let mut leaving = scheduled("False", "Unschedulable", "0/0 nodes are available");
        leaving.metadata.deletion_timestamp = leaving.metadata.creation_timestamp.clone();
        assert_eq!(unscheduled(&leaving, at("2026-12-01T11:00:00Z")), None);
    }

    fn status(instances: &[(&str, Option<(SchedulingReason, &str)>)]) -> PostgresClusterStatus {
        PostgresClusterStatus {
            instances: instances
                .iter()
                .map(|(name, waiting)| tusk_api::v1alpha1::InstanceStatus {
                    name: (*name).to_owned(),
                    unscheduled: waiting.map(|(reason, message)| Unscheduled {
                        reason,
                        message: message.to_owned(),
                    }),
                    ..Default::default()
                })
                .collect(),
            ..PostgresClusterStatus::default()
        }
    }

    #[test]
    fn an_instance_that_starts_waiting_for_a_node_is_warned_about_once() {
        use SchedulingReason::{NotScheduledYet, Unschedulable};
        let first = status(&[("db-1", Some((Unschedulable, "0/0 nodes are available")))]);
        let notes = notes(None, &first);
        assert_eq!(
            notes,
            [Note::warning(
                "Unschedulable",
                "db-1: 0/0 nodes are available".to_owned()
            )]
        );
        // The scheduler counts nodes again: no new warning.
        let recounted = status(&[("db-1", Some((Unschedulable, "0/1 nodes are available")))]);
        assert!(super::notes(Some(&first), &recounted).is_empty());
        // Another reason is news; so is waiting again after being placed.
        let unseen = status(&[("db-1", Some((NotScheduledYet, "not scheduled yet")))]);
        assert_eq!(super::notes(Some(&first), &unseen).len(), 1);
        let placed = status(&[("db-1", None)]);
        assert!(super::notes(Some(&first), &placed).is_empty());
        assert_eq!(super::notes(Some(&placed), &first).len(), 1);
    }

    #[test]
    fn the_ready_reason_names_the_worst_wait_and_every_instance_is_listed() {
        use SchedulingReason::{NotScheduledYet, Unschedulable};
        let mixed = status(&[
            ("db-1", None),
            ("db-2", Some((NotScheduledYet, "not scheduled yet"))),
            ("db-3", Some((Unschedulable, "0/1 nodes are available"))),
        ]);
        let (reason, lines) = waiting(&mixed);
        assert_eq!(reason, Some(Unschedulable));
        assert_eq!(
            lines,
            [
                "db-2: NotScheduledYet: not scheduled yet",
                "db-3: Unschedulable: 0/1 nodes are available"
            ]
        );
        assert_eq!(waiting(&status(&[("db-1", None)])), (None, vec![]));
    }
}
