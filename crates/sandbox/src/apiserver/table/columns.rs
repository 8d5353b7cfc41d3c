//! The columns kubectl shows for the built-in kinds: one table of cell
//! functions per kind.

use serde_json::{Value, json};

use crate::apiserver::table::cells::text;
use crate::apiserver::table::column::{Column, string};
use crate::apiserver::table::{events, kinds, nodes, pods, volumes, workloads};

/// The columns of a built-in kind around NAME (always first) and AGE.
pub struct Layout {
    /// Whether NAME leads; an Event's name comes last, among the wide ones.
    pub name_first: bool,
    pub before_age: &'static [Column],
    /// Kinds without a printer of their own show `Created At` instead.
    pub age: bool,
    pub after_age: &'static [Column],
}

const fn layout(before_age: &'static [Column], after_age: &'static [Column]) -> Layout {
    Layout {
        name_first: true,
        before_age,
        age: true,
        after_age,
    }
}

/// The columns kube-apiserver prints for a built-in kind.
pub fn builtin_columns(kind: &str) -> Layout {
    match kind {
        "Pod" => layout(POD, POD_WIDE),
        "Deployment" => layout(workloads::DEPLOYMENT, &[]),
        "ReplicaSet" => layout(workloads::REPLICA_SET, &[]),
        "Node" => layout(NODE, NODE_AFTER_AGE),
        "Service" => layout(SERVICE, SERVICE_WIDE),
        "Endpoints" => layout(ENDPOINTS, &[]),
        "PersistentVolumeClaim" => layout(volumes::CLAIM, volumes::VOLUME_MODE),
        "PersistentVolume" => layout(volumes::VOLUME, volumes::VOLUME_MODE),
        "Namespace" => layout(NAMESPACE, &[]),
        "ConfigMap" => layout(CONFIG_MAP, &[]),
        "Secret" => layout(SECRET, &[]),
        "ServiceAccount" => layout(SERVICE_ACCOUNT, &[]),
        "Lease" => layout(LEASE, &[]),
        "PodDisruptionBudget" => layout(POD_DISRUPTION_BUDGET, &[]),
        "RoleBinding" | "ClusterRoleBinding" => layout(BINDING, BINDING_WIDE),
        "Event" => Layout {
            name_first: false,
            before_age: events::COLUMNS,
            age: false,
            after_age: &[],
        },
        "Role" | "ClusterRole" | "CustomResourceDefinition" => Layout {
            name_first: true,
            before_age: CREATED_AT,
            age: false,
            after_age: &[],
        },
        _ => layout(&[], &[]),
    }
}

const POD: &[Column] = &[
    string("Ready", 0, |o| json!(pods::ready(o))),
    string("Status", 0, |o| json!(pods::status(o))),
    string("Restarts", 0, |o| {
        json!(pods::restarts(o, jiff::Timestamp::now().as_second()))
    }),
];

const POD_WIDE: &[Column] = &[
    string("IP", 1, |o| json!(pods::wide(o)[0])),
    string("Node", 1, |o| json!(pods::wide(o)[1])),
    string("Nominated Node", 1, |o| json!(pods::wide(o)[2])),
    string("Readiness Gates", 1, |o| json!(pods::wide(o)[3])),
];

const NODE: &[Column] = &[
    string("Status", 0, |o| json!(nodes::status(o))),
    string("Roles", 0, |o| json!(nodes::roles(o))),
];

const NODE_AFTER_AGE: &[Column] = &[
    string("Version", 0, |o| {
        json!(
            o.pointer("/status/nodeInfo/kubeletVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
        )
    }),
    string("Internal-IP", 1, |o| json!(nodes::address(o, "InternalIP"))),
    string("External-IP", 1, |o| json!(nodes::address(o, "ExternalIP"))),
    string("OS-Image", 1, |o| json!(nodes::info(o, "osImage"))),
    string("Kernel-Version", 1, |o| {
        json!(nodes::info(o, "kernelVersion"))
    }),
    string("Container-Runtime", 1, |o| {
        json!(nodes::info(o, "containerRuntimeVersion"))
    }),
];

const ENDPOINTS: &[Column] = &[string("Endpoints", 0, |o| json!(kinds::endpoints(o)))];

const SERVICE_ACCOUNT: &[Column] = &[string("Secrets", 0, |o| {
    json!(
        o.get("secrets")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    )
})];

const LEASE: &[Column] = &[string("Holder", 0, |o| {
    json!(
        o.pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or("")
    )
})];

const POD_DISRUPTION_BUDGET: &[Column] = &[
    string("Min Available", 0, |o| {
        json!(kinds::int_or_string(o.pointer("/spec/minAvailable")))
    }),
    string("Max Unavailable", 0, |o| {
        json!(kinds::int_or_string(o.pointer("/spec/maxUnavailable")))
    }),
    Column {
        name: "Allowed Disruptions",
        type_: "integer",
        format: "",
        priority: 0,
        cell: |o| {
            json!(
                o.pointer("/status/disruptionsAllowed")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            )
        },
    },
];

const BINDING: &[Column] = &[string("Role", 0, |o| json!(kinds::role_ref(o)))];

const BINDING_WIDE: &[Column] = &[
    string("Users", 1, |o| json!(kinds::subjects(o, "User"))),
    string("Groups", 1, |o| json!(kinds::subjects(o, "Group"))),
    string("ServiceAccounts", 1, |o| {
        json!(kinds::subjects(o, "ServiceAccount"))
    }),
];

const SERVICE_WIDE: &[Column] = &[string("Selector", 1, |o| json!(kinds::selector(o)))];

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
        cell: |o| json!(kinds::service_external_ip(o)),
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

const CREATED_AT: &[Column] = &[Column {
    name: "Created At",
    type_: "date",
    format: "",
    priority: 0,
    cell: |o| text(o.pointer("/metadata/creationTimestamp")),
}];
