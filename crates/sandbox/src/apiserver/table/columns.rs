//! The columns kubectl shows for the built-in kinds: one table of cell
//! functions per kind.

use serde_json::{Value, json};

use crate::apiserver::table::cells::text;
use crate::apiserver::table::workloads;

pub struct Column {
    pub name: &'static str,
    pub type_: &'static str,
    pub format: &'static str,
    pub priority: i64,
    pub cell: fn(&Value) -> Value,
}

/// The usual columns of a built-in kind.
pub fn builtin_columns(kind: &str) -> &'static [Column] {
    match kind {
        "Pod" => POD,
        "Service" => SERVICE,
        "PersistentVolumeClaim" => PERSISTENT_VOLUME_CLAIM,
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIG_MAP,
        "Secret" => SECRET,
        "CustomResourceDefinition" => CUSTOM_RESOURCE_DEFINITION,
        "Deployment" => workloads::DEPLOYMENT,
        "ReplicaSet" => workloads::REPLICA_SET,
        _ => &[],
    }
}

const POD: &[Column] = &[
    Column {
        name: "Ready",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map_or(0, |s| {
                    s.iter()
                        .filter(|c| c.get("ready") == Some(&Value::Bool(true)))
                        .count()
                });
            json!(format!("{ready}/{total}"))
        },
    },
    Column {
        name: "Status",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                json!("Terminating")
            } else {
                text(o.pointer("/status/phase"))
            }
        },
    },
    Column {
        name: "Restarts",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            let restarts: i64 = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map_or(0, |s| {
                    s.iter()
                        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                        .sum()
                });
            json!(restarts.to_string())
        },
    },
];

const SERVICE: &[Column] = &[
    Column {
        name: "Type",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| text(o.pointer("/spec/type")),
    },
    Column {
        name: "Cluster-IP",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| text(o.pointer("/spec/clusterIP")),
    },
    Column {
        name: "External-IP",
        type_: "string",
        format: "",
        priority: 0,
        cell: |_| json!("<none>"),
    },
    Column {
        name: "Port(s)",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            let ports: Vec<String> = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter()
                        .map(|p| {
                            format!(
                                "{}/{}",
                                p.get("port").map(|v| v.to_string()).unwrap_or_default(),
                                p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!(if ports.is_empty() {
                "<none>".to_owned()
            } else {
                ports.join(",")
            })
        },
    },
];

const PERSISTENT_VOLUME_CLAIM: &[Column] = &[
    Column {
        name: "Status",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| text(o.pointer("/status/phase")),
    },
    Column {
        name: "Volume",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            json!(
                o.pointer("/spec/volumeName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        },
    },
    Column {
        name: "Capacity",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            json!(
                o.pointer("/status/capacity/storage")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        },
    },
    Column {
        name: "Access Modes",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| {
            let modes: Vec<&str> = o
                .pointer("/spec/accessModes")
                .and_then(Value::as_array)
                .map(|m| {
                    m.iter()
                        .filter_map(Value::as_str)
                        .map(|m| match m {
                            "ReadWriteOnce" => "RWO",
                            "ReadOnlyMany" => "ROX",
                            "ReadWriteMany" => "RWX",
                            "ReadWriteOncePod" => "RWOP",
                            other => other,
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!(modes.join(","))
        },
    },
    Column {
        name: "StorageClass",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| text(o.pointer("/spec/storageClassName")),
    },
];

const NAMESPACE: &[Column] = &[Column {
    name: "Status",
    type_: "string",
    format: "",
    priority: 0,
    cell: |o| text(o.pointer("/status/phase")),
}];

const CONFIG_MAP: &[Column] = &[Column {
    name: "Data",
    type_: "integer",
    format: "",
    priority: 0,
    cell: |o| {
        let n = o
            .get("data")
            .and_then(Value::as_object)
            .map_or(0, |d| d.len())
            + o.get("binaryData")
                .and_then(Value::as_object)
                .map_or(0, |d| d.len());
        json!(n)
    },
}];

const SECRET: &[Column] = &[
    Column {
        name: "Type",
        type_: "string",
        format: "",
        priority: 0,
        cell: |o| text(o.get("type")),
    },
    Column {
        name: "Data",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| {
            json!(
                o.get("data")
                    .and_then(Value::as_object)
                    .map_or(0, |d| d.len())
            )
        },
    },
];

const CUSTOM_RESOURCE_DEFINITION: &[Column] = &[Column {
    name: "Created At",
    type_: "date",
    format: "",
    priority: 0,
    cell: |o| text(o.pointer("/metadata/creationTimestamp")),
}];
