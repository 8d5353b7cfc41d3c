//! What the node lifecycle controller concludes from a node's reports:
//! whether it has gone silent, what its conditions become then, and the
//! taints its Ready condition calls for. Pure functions of the observed
//! objects and the time.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The taint of a node the control plane no longer hears from.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The taint of a node whose kubelet reports it not ready.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";

const STALE_REASON: &str = "NodeStatusUnknown";
const STALE_MESSAGE: &str = "Kubelet stopped posting node status.";

fn conditions(node: &Node) -> &[NodeCondition] {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// The status of the node's Ready condition (`True`, `False`, `Unknown`).
pub fn ready(node: &Node) -> Option<&str> {
    conditions(node)
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// When the node was last heard from: its Ready condition's heartbeat or
/// its Lease's renewal, whichever is later.
pub fn last_heard(node: &Node, lease: Option<&Lease>) -> Option<Timestamp> {
    let heartbeat = conditions(node)
        .iter()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0);
    let renewed = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);
    heartbeat.max(renewed)
}

/// Whether the node has been silent for longer than `grace` and its
/// conditions do not say so yet. `watching_since` is when this controller
/// started watching: like kube-controller-manager, which measures silence
/// from its own observations, it gives every node a full grace period
/// after it starts (a sandbox restarted after a long stop would otherwise
/// find its node silent before the kubelet's first report).
pub fn gone_silent(
    node: &Node,
    lease: Option<&Lease>,
    grace: Duration,
    now: Timestamp,
    watching_since: Timestamp,
) -> bool {
    let Some(heard) = last_heard(node, lease).map(|h| h.max(watching_since)) else {
        return false;
    };
    let silent = now.duration_since(heard).unsigned_abs() > grace && heard < now;
    silent && ready(node).is_some_and(|r| r != "Unknown")
}

/// Every condition turned `Unknown`, as the controller marks a silent
/// node: the heartbeat stays (it is the last one heard), the transition
/// time is now.
pub fn silent_conditions(node: &Node, now: Timestamp) -> Vec<NodeCondition> {
    conditions(node)
        .iter()
        .map(|c| NodeCondition {
            status: "Unknown".into(),
            reason: Some(STALE_REASON.into()),
            message: Some(STALE_MESSAGE.into()),
            last_transition_time: if c.status == "Unknown" {
                c.last_transition_time.clone()
            } else {
                Some(Time(now))
            },
            ..c.clone()
        })
        .collect()
}

/// The node's taints as its Ready condition wants them: `unreachable`
/// while Unknown, `not-ready` while False (each as NoSchedule and
/// NoExecute, the latter stamped with when it was added), neither while
/// True. Other taints stay as they are.
pub fn wanted_taints(node: &Node, now: Timestamp) -> Vec<Taint> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let key = match ready(node) {
        Some("Unknown") => Some(UNREACHABLE),
        Some("False") => Some(NOT_READY),
        _ => None,
    };
    let mut wanted: Vec<Taint> = current
        .iter()
        .filter(|t| t.key != UNREACHABLE && t.key != NOT_READY || Some(t.key.as_str()) == key)
        .cloned()
        .collect();
    if let Some(key) = key {
        for effect in ["NoSchedule", "NoExecute"] {
            if !wanted.iter().any(|t| t.key == key && t.effect == effect) {
                wanted.push(Taint {
                    key: key.into(),
                    effect: effect.into(),
                    time_added: (effect == "NoExecute").then_some(Time(now)),
                    value: None,
                });
            }
        }
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(ready: &str, heartbeat: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready,
                "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .expect("node")
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    #[test]
    fn a_node_is_silent_after_the_grace_period_from_its_last_report() {
        let grace = Duration::from_secs(40);
        let start = at("2020-01-01T00:00:00Z");
        let ready = node("True", "2026-01-01T00:00:00Z", json!([]));
        let silent = |lease: Option<&Lease>, now: &str, since: Timestamp| {
            gone_silent(&ready, lease, grace, at(now), since)
        };
        assert!(!silent(None, "2026-01-01T00:00:40Z", start));
        assert!(silent(None, "2026-01-01T00:00:41Z", start));
        assert!(
            !silent(None, "2026-01-01T00:00:41Z", at("2026-01-01T00:00:30Z")),
            "a full grace period from when the controller started"
        );
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": "n"}, "spec": {"renewTime": "2026-01-01T00:00:30.000000Z"}
        }))
        .expect("lease");
        assert!(
            !silent(Some(&lease), "2026-01-01T00:00:41Z", start),
            "a renewed Lease is a sign of life"
        );
        let unknown = node("Unknown", "2026-01-01T00:00:00Z", json!([]));
        let later = at("2026-01-01T01:00:00Z");
        assert!(!gone_silent(&unknown, None, grace, later, start));
    }

    #[test]
    fn a_silent_node_s_conditions_turn_unknown_keeping_the_last_heartbeat() {
        let ready = node("True", "2026-01-01T00:00:00Z", json!([]));
        let now = at("2026-01-01T00:01:00Z");
        let conditions = silent_conditions(&ready, now);
        assert_eq!(conditions[0].status, "Unknown");
        assert_eq!(conditions[0].reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            conditions[0].last_heartbeat_time,
            Some(Time(at("2026-01-01T00:00:00Z")))
        );
        assert_eq!(conditions[0].last_transition_time, Some(Time(now)));
    }

    #[test]
    fn taints_follow_the_ready_condition_and_keep_others() {
        let now = at("2026-01-01T00:01:00Z");
        let other = json!({"key": "dedicated", "value": "db", "effect": "NoSchedule"});
        let unknown = node("Unknown", "2026-01-01T00:00:00Z", json!([other]));
        let taints = wanted_taints(&unknown, now);
        let keys: Vec<(&str, &str)> = taints
            .iter()
            .map(|t| (t.key.as_str(), t.effect.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("dedicated", "NoSchedule"),
                (UNREACHABLE, "NoSchedule"),
                (UNREACHABLE, "NoExecute")
            ]
        );
        assert_eq!(taints[2].time_added, Some(Time(now)));
        let tainted = node(
            "Unknown",
            "2026-01-01T00:00:00Z",
            serde_json::to_value(&taints).expect("json"),
        );
        assert_eq!(
            wanted_taints(&tainted, at("2026-01-01T00:05:00Z")),
            taints,
            "the time a taint was added stays"
        );
        let not_ready = node("False", "2026-01-01T00:00:00Z", json!([other]));
        assert_eq!(wanted_taints(&not_ready, now)[1].key, NOT_READY);
        let back = node(
            "True",
            "2026-01-01T00:02:00Z",
            serde_json::to_value(&taints).expect("json"),
        );
        assert_eq!(wanted_taints(&back, now).len(), 1, "only the user's taint");
    }
}
