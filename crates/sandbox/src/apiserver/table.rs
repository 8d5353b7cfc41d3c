//! Server-side printing: `kubectl get` asks for a `meta.k8s.io/v1` Table
//! and prints the cells as they come, so the columns (a custom resource's
//! `additionalPrinterColumns`, or the built-in kinds' usual columns) are
//! computed here.

use serde_json::{Value, json};

use crate::apiserver::resources::{PrinterColumn, Resource};

/// Whether the client asked for a Table (`Accept: ...;as=Table;...`).
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

struct Column {
    name: &'static str,
    type_: &'static str,
    format: &'static str,
    priority: i64,
    cell: fn(&Value) -> Value,
}

fn text(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(s)) => json!(s),
        Some(Value::Null) | None => json!("<none>"),
        Some(other) => json!(other.to_string()),
    }
}

fn builtin_columns(kind: &str) -> Vec<Column> {
    match kind {
        "Pod" => vec![
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
        ],
        "Service" => vec![
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
        ],
        "PersistentVolumeClaim" => vec![
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
        ],
        "Namespace" => vec![Column {
            name: "Status",
            type_: "string",
            format: "",
            priority: 0,
            cell: |o| text(o.pointer("/status/phase")),
        }],
        "ConfigMap" => vec![Column {
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
        }],
        "Secret" => vec![
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
        ],
        "CustomResourceDefinition" => vec![Column {
            name: "Created At",
            type_: "date",
            format: "",
            priority: 0,
            cell: |o| text(o.pointer("/metadata/creationTimestamp")),
        }],
        _ => Vec::new(),
    }
}

/// `5m`, `3h`, `2d`: the age format kubectl shows.
fn age(timestamp: Option<&str>) -> Value {
    let Some(created) = timestamp.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return json!("<unknown>");
    };
    let seconds = (jiff::Timestamp::now().as_second() - created.as_second()).max(0);
    let text = match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    };
    json!(text)
}

/// Evaluates the simple JSONPath of printer columns: `.a.b`, `.a[0].b`.
fn json_path<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    let mut current = object;
    let trimmed = path.trim().trim_start_matches('{').trim_end_matches('}');
    for part in trimmed
        .trim_start_matches('.')
        .split('.')
        .filter(|p| !p.is_empty())
    {
        let (field, index) = match part.split_once('[') {
            Some((field, rest)) => (field, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        if !field.is_empty() {
            current = current.get(field)?;
        }
        if let Some(index) = index {
            current = current.get(index)?;
        }
    }
    Some(current)
}

fn custom_cell(column: &PrinterColumn, object: &Value) -> Value {
    let value = json_path(object, &column.json_path);
    if column.type_ == "date" {
        return age(value.and_then(Value::as_str));
    }
    match value {
        None | Some(Value::Null) => Value::Null,
        Some(v) => v.clone(),
    }
}

fn definition(name: &str, type_: &str, format: &str, priority: i64, description: &str) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// The row object kubectl receives (`includeObject`, default Metadata).
fn row_object(object: &Value, include: &str) -> Value {
    match include {
        "None" => Value::Null,
        "Object" => object.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
        }),
    }
}

/// A Table of `objects`.
pub fn render(
    resource: &Resource,
    version: &str,
    objects: &[Value],
    list_meta: Value,
    include: &str,
) -> Value {
    let mut columns = vec![definition(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    )];
    let mut rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({"cells": [o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)],
                   "object": row_object(o, include)})
        })
        .collect();
    let printer = resource
        .version(version)
        .map(|v| v.printer_columns.clone())
        .unwrap_or_default();
    let mut push_cells = |cells: Vec<Value>| {
        for (row, cell) in rows.iter_mut().zip(cells) {
            if let Some(Value::Array(row_cells)) = row.get_mut("cells") {
                row_cells.push(cell);
            }
        }
    };
    if resource.custom && !printer.is_empty() {
        for column in &printer {
            columns.push(definition(
                &column.name,
                &column.type_,
                &column.format,
                column.priority,
                &column.description,
            ));
            push_cells(objects.iter().map(|o| custom_cell(column, o)).collect());
        }
    } else {
        for column in builtin_columns(&resource.kind) {
            columns.push(definition(
                column.name,
                column.type_,
                column.format,
                column.priority,
                "",
            ));
            push_cells(objects.iter().map(column.cell).collect());
        }
        columns.push(definition("Age", "string", "", 0, "CreationTimestamp is a timestamp representing the server time when this object was created."));
        push_cells(
            objects
                .iter()
                .map(|o| {
                    age(o
                        .pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str))
                })
                .collect(),
        );
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_column_paths_read_nested_fields() {
        let object = json!({"spec": {"instances": 3, "list": [{"a": "x"}]}});
        assert_eq!(json_path(&object, ".spec.instances"), Some(&json!(3)));
        assert_eq!(json_path(&object, ".spec.list[0].a"), Some(&json!("x")));
        assert_eq!(json_path(&object, ".status.phase"), None);
    }
}
