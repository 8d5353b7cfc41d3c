//! `kubectl get deploy` and `kubectl get rs` columns, as kube-apiserver's
//! printers define them (`pkg/printers/internalversion`).

use serde_json::{Value, json};

use crate::apiserver::table::column::Column;

fn count(o: &Value, pointer: &str) -> i64 {
    o.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

pub const DEPLOYMENT: &[Column] = &[
    Column {
        name: "Ready",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            json!(format!(
                "{}/{}",
                count(o, "/status/readyReplicas"),
                count(o, "/spec/replicas")
            ))
        },
    },
    Column {
        name: "Up-to-date",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| json!(count(o, "/status/updatedReplicas")),
    },
    Column {
        name: "Available",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| json!(count(o, "/status/availableReplicas")),
    },
];

pub const REPLICA_SET: &[Column] = &[
    Column {
        name: "Desired",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| json!(count(o, "/spec/replicas")),
    },
    Column {
        name: "Current",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| json!(count(o, "/status/replicas")),
    },
    Column {
        name: "Ready",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| json!(count(o, "/status/readyReplicas")),
    },
];
