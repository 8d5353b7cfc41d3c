//! An Event's columns as kube-apiserver prints them: LAST SEEN, TYPE,
//! REASON, OBJECT and MESSAGE, and for `-o wide` SUBOBJECT, SOURCE, FIRST
//! SEEN, COUNT and NAME (the name comes last).

use serde_json::{Value, json};

use crate::apiserver::table::cells::since;
use crate::apiserver::table::column::{Column, string};

fn str_at<'v>(event: &'v Value, pointer: &str) -> &'v str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn ago(text: &str, now: i64) -> Option<String> {
    text.parse::<jiff::Timestamp>()
        .ok()
        .map(|at| since(at, now))
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// FIRST SEEN: `firstTimestamp`, else `eventTime`.
pub fn first_seen(event: &Value, now: i64) -> String {
    ago(str_at(event, "/firstTimestamp"), now)
        .or_else(|| ago(str_at(event, "/eventTime"), now))
        .unwrap_or_else(|| "<unknown>".to_owned())
}

/// LAST SEEN: the series' last observation, `lastTimestamp`, or the first.
pub fn last_seen(event: &Value, now: i64) -> String {
    ago(str_at(event, "/series/lastObservedTime"), now)
        .or_else(|| ago(str_at(event, "/lastTimestamp"), now))
        .unwrap_or_else(|| first_seen(event, now))
}

/// COUNT: the series' count, or `count` (at least 1).
pub fn count(event: &Value) -> i64 {
    event
        .pointer("/series/count")
        .or_else(|| event.get("count"))
        .and_then(Value::as_i64)
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// OBJECT: `kind/name` of the involved object, the kind in lower case.
pub fn object(event: &Value) -> String {
    let kind = str_at(event, "/involvedObject/kind").to_lowercase();
    match str_at(event, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    }
}

/// SOURCE: the reporting component, and its host or instance.
pub fn source(event: &Value) -> String {
    let first = |a: &str, b: &str| {
        let a = str_at(event, a);
        if a.is_empty() {
            str_at(event, b).to_owned()
        } else {
            a.to_owned()
        }
    };
    let component = first("/source/component", "/reportingComponent");
    let host = first("/source/host", "/reportingInstance");
    match (component.is_empty(), host.is_empty()) {
        (true, _) => "<unknown>".to_owned(),
        (false, true) => component,
        (false, false) => format!("{component}, {host}"),
    }
}

pub const COLUMNS: &[Column] = &[
    string("Last Seen", 0, |e| json!(last_seen(e, now()))),
    string("Type", 0, |e| json!(str_at(e, "/type"))),
    string("Reason", 0, |e| json!(str_at(e, "/reason"))),
    string("Object", 0, |e| json!(object(e))),
    string("Subobject", 1, |e| {
        json!(str_at(e, "/involvedObject/fieldPath"))
    }),
    string("Source", 1, |e| json!(source(e))),
    string("Message", 0, |e| json!(str_at(e, "/message").trim())),
    string("First Seen", 1, |e| json!(first_seen(e, now()))),
    string("Count", 1, |e| json!(count(e).to_string())),
    Column {
        name: "Name",
        type_: "string",
        format: "name",
        priority: 1,
        cell: |e| json!(str_at(e, "/metadata/name")),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_prints_its_times_object_source_and_count() {
        let now = 1_700_000_000;
        let at = |ago: i64| {
            jiff::Timestamp::from_second(now - ago)
                .expect("time")
                .to_string()
        };
        let recorded = json!({
            "metadata": {"name": "small.1"},
            "involvedObject": {"kind": "PostgresCluster", "name": "small"},
            "firstTimestamp": at(600), "lastTimestamp": at(30), "count": 4,
            "source": {"component": "tusk-operator"},
        });
        assert_eq!(first_seen(&recorded, now), "10m");
        assert_eq!(last_seen(&recorded, now), "30s");
        assert_eq!(count(&recorded), 4);
        assert_eq!(object(&recorded), "postgrescluster/small");
        assert_eq!(source(&recorded), "tusk-operator");
        let series = json!({
            "eventTime": at(300), "reportingComponent": "kubelet", "reportingInstance": "node-1",
            "series": {"count": 7, "lastObservedTime": at(5)},
            "involvedObject": {"kind": "Node"},
        });
        assert_eq!(first_seen(&series, now), "5m");
        assert_eq!(last_seen(&series, now), "5s");
        assert_eq!(count(&series), 7);
        assert_eq!(object(&series), "node");
        assert_eq!(source(&series), "kubelet, node-1");
        assert_eq!(count(&json!({})), 1);
        assert_eq!(source(&json!({})), "<unknown>");
    }
}
