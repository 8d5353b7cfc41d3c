//! Server-side printing: `kubectl get` asks for a `meta.k8s.io/v1` Table
//! and prints the cells as they come, so the columns (a custom resource's
//! `additionalPrinterColumns`, or the built-in kinds' usual columns) are
//! computed here.

mod cells;
mod columns;
mod workloads;

use serde_json::{Value, json};

use crate::apiserver::resources::{PrinterColumn, Resource};
use cells::age;
use columns::builtin_columns;

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
