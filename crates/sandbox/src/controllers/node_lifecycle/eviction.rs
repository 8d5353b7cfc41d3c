//! When a pod on a node with NoExecute taints is evicted, as the taint
//! eviction controller decides it: at once when some taint is not
//! tolerated; else once the shortest `tolerationSeconds` among the
//! tolerations used has passed since the taint was added (never when none
//! of them sets it). The not-ready and unreachable tolerations that
//! admission adds (300 s, DefaultTolerationSeconds) make the default five
//! minutes.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Taint, Toleration};

/// When a pod is to be evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    Never,
    At(Timestamp),
}

fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// When a pod with `tolerations` is evicted from a node with `taints`
/// (`now` stands for a taint without the time it was added).
pub fn eviction(tolerations: &[Toleration], taints: &[Taint], now: Timestamp) -> Eviction {
    let mut due: Option<Timestamp> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let added = taint.time_added.as_ref().map_or(now, |t| t.0);
        let used: Vec<&Toleration> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if used.is_empty() {
            return Eviction::At(added);
        }
        let Some(seconds) = used.iter().filter_map(|t| t.toleration_seconds).min() else {
            continue;
        };
        let at = added
            .checked_add(SignedDuration::from_secs(seconds.max(0)))
            .unwrap_or(added);
        due = Some(due.map_or(at, |d| d.min(at)));
    }
    due.map_or(Eviction::Never, Eviction::At)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid")
    }

    #[test]
    fn eviction_waits_for_the_shortest_toleration_of_the_taint() {
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().expect("time");
        let taints: Vec<Taint> = parse(json!([
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}
        ]));
        let defaults: Vec<Toleration> = parse(json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ]));
        let five_minutes = "2026-01-01T00:05:00Z".parse().expect("time");
        assert_eq!(
            eviction(&defaults, &taints, now),
            Eviction::At(five_minutes)
        );
        let forever: Vec<Toleration> = parse(json!([{"operator": "Exists"}]));
        assert_eq!(eviction(&forever, &taints, now), Eviction::Never);
        let both: Vec<Toleration> = parse(json!([
            {"operator": "Exists"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 2}
        ]));
        let two_seconds = "2026-01-01T00:00:02Z".parse().expect("time");
        assert_eq!(eviction(&both, &taints, now), Eviction::At(two_seconds));
        let added = "2026-01-01T00:00:00Z".parse().expect("time");
        assert_eq!(
            eviction(&[], &taints, now),
            Eviction::At(added),
            "untolerated: at once"
        );
        let other: Vec<Toleration> = parse(json!([
            {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "value": "x", "effect": "NoExecute"}
        ]));
        assert_eq!(eviction(&other, &taints, now), Eviction::At(added));
    }
}
