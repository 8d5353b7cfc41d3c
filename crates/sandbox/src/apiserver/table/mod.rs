//! Server-side printing: `kubectl get` asks for a `meta.k8s.io/v1` Table
//! and prints the cells as they come, so the columns (a custom resource's
//! `additionalPrinterColumns`, or the built-in kinds' usual columns) are
//! computed here.

mod cells;
mod column;
mod columns;
mod events;
mod kinds;
mod nodes;
mod pods;
mod volumes;
mod workloads;

use serde_json::{Value, json};

use crate::apiserver::resources::{PrinterColumn, Resource};
use cells::age;
use column::Column;
use columns::builtin_columns;

const AGE: Column = Column {
    name: "Age",
    type_: "string",
    format: "",
    priority: 0,
    cell: |o| {
        age(o
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str))
    },
};

/// Whether the client asked for a Table (`Accept: ...;as=Table;...`).
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
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
    let layout = builtin_columns(&resource.kind);
    let name_first = resource.custom || layout.name_first;
    let mut columns = Vec::new();
    if name_first {
        columns.push(definition(
            "Name",
            "string",
            "name",
            0,
            "Name must be unique within a namespace.",
        ));
    }
    let mut rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let name = o.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
            let cells = if name_first { vec![name] } else { Vec::new() };
            json!({"cells": cells, "object": row_object(o, include)})
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
        let mut add = |column: &Column| {
            columns.push(definition(
                column.name,
                column.type_,
                column.format,
                column.priority,
                "",
            ));
            push_cells(objects.iter().map(column.cell).collect());
        };
        layout.before_age.iter().for_each(&mut add);
        if layout.age {
            add(&AGE);
        }
        layout.after_age.iter().for_each(&mut add);
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

    fn column_names(key: &str) -> Vec<String> {
        let registry = crate::apiserver::resources::Registry::with_builtins();
        let resource = registry.by_key(key).expect("a built-in kind");
        let table = render(&resource, "v1", &[], json!({}), "None");
        table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| {
                let name = c["name"].as_str().unwrap_or("").to_owned();
                if c["priority"] == 1 {
                    format!("{name}*")
                } else {
                    name
                }
            })
            .collect()
    }

    /// Columns in kube-apiserver's order; `*` marks the `-o wide` ones.
    #[test]
    fn built_in_kinds_have_kube_apiservers_columns() {
        let cases: [(&str, &[&str]); 8] = [
            (
                "/persistentvolumeclaims",
                &[
                    "Name",
                    "Status",
                    "Volume",
                    "Capacity",
                    "Access Modes",
                    "StorageClass",
                    "VolumeAttributesClass",
                    "Age",
                    "VolumeMode*",
                ],
            ),
            (
                "/persistentvolumes",
                &[
                    "Name",
                    "Capacity",
                    "Access Modes",
                    "Reclaim Policy",
                    "Status",
                    "Claim",
                    "StorageClass",
                    "VolumeAttributesClass",
                    "Reason",
                    "Age",
                    "VolumeMode*",
                ],
            ),
            (
                "/events",
                &[
                    "Last Seen",
                    "Type",
                    "Reason",
                    "Object",
                    "Subobject*",
                    "Source*",
                    "Message",
                    "First Seen*",
                    "Count*",
                    "Name*",
                ],
            ),
            (
                "/nodes",
                &[
                    "Name",
                    "Status",
                    "Roles",
                    "Age",
                    "Version",
                    "Internal-IP*",
                    "External-IP*",
                    "OS-Image*",
                    "Kernel-Version*",
                    "Container-Runtime*",
                ],
            ),
            (
                "/pods",
                &[
                    "Name",
                    "Ready",
                    "Status",
                    "Restarts",
                    "Age",
                    "IP*",
                    "Node*",
                    "Nominated Node*",
                    "Readiness Gates*",
                ],
            ),
            (
                "/services",
                &[
                    "Name",
                    "Type",
                    "Cluster-IP",
                    "External-IP",
                    "Port(s)",
                    "Age",
                    "Selector*",
                ],
            ),
            (
                "rbac.authorization.k8s.io/rolebindings",
                &[
                    "Name",
                    "Role",
                    "Age",
                    "Users*",
                    "Groups*",
                    "ServiceAccounts*",
                ],
            ),
            ("rbac.authorization.k8s.io/roles", &["Name", "Created At"]),
        ];
        for (key, expected) in cases {
            assert_eq!(column_names(key), expected, "{key}");
        }
    }

    #[test]
    fn printer_column_paths_read_nested_fields() {
        let object = json!({"spec": {"instances": 3, "list": [{"a": "x"}]}});
        assert_eq!(json_path(&object, ".spec.instances"), Some(&json!(3)));
        assert_eq!(json_path(&object, ".spec.list[0].a"), Some(&json!("x")));
        assert_eq!(json_path(&object, ".status.phase"), None);
    }
}
