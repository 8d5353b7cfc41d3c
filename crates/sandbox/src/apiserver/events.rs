//! One store for Events, two APIs: `events.k8s.io/v1` (what kube-rs's
//! recorder writes) and core `v1` (what `kubectl describe` reads).
//!
//! Kubernetes keeps a single Event resource and converts between the two
//! versions, so an event recorded through one group is listed through the
//! other. Events are stored in the core form and converted at the edge.

use serde_json::{Map, Value};

/// Field names that differ: (events.k8s.io/v1, core/v1).
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(object: &Value, api_version: &str, from_events: bool) -> Value {
    let Some(map) = object.as_object() else {
        return object.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let renamed = RENAMED.iter().find_map(|(events, core)| {
            if from_events {
                (key == events).then_some(*core)
            } else {
                (key == core).then_some(*events)
            }
        });
        out.insert(renamed.unwrap_or(key).to_owned(), value.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.to_owned()));
    Value::Object(out)
}

/// A stored (core) Event as `events.k8s.io/v1` shows it.
pub fn to_events_v1(core: &Value) -> Value {
    rename(core, "events.k8s.io/v1", false)
}

/// An `events.k8s.io/v1` Event in the stored (core) form.
pub fn to_core(event: &Value) -> Value {
    rename(event, "v1", true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_convert_both_ways() {
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "regarding": {"name": "db"}, "note": "Promoted",
            "reason": "Failover", "reportingController": "tusk", "eventTime": "2026-01-01T00:00:00.000000Z"});
        let core = to_core(&event);
        assert_eq!(core["involvedObject"]["name"], "db");
        assert_eq!(core["message"], "Promoted");
        assert_eq!(core["reportingComponent"], "tusk");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(to_events_v1(&core), event);
    }
}
