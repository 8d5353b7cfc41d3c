//! Which lists are associative, sets or atomic: from the Go struct tags of
//! built-in kinds, or from a custom resource's schema.

use serde_json::Value;

use crate::apiserver::apply::path::Seg;
use crate::apiserver::patch::merge_key;

/// How a list is merged and owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    Atomic,
    Map(Vec<String>),
    Set,
}

/// Tells the list type of the list at a path.
pub trait ListTypes {
    fn list_kind(&self, path: &[Seg]) -> ListKind;
}

/// List types of built-in kinds, from their Go struct tags.
pub struct BuiltinLists;

impl ListTypes for BuiltinLists {
    fn list_kind(&self, path: &[Seg]) -> ListKind {
        let fields: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Seg::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect();
        let Some(field) = fields.last() else {
            return ListKind::Atomic;
        };
        if *field == "finalizers" {
            return ListKind::Set;
        }
        let parent = fields
            .len()
            .checked_sub(2)
            .and_then(|i| fields.get(i))
            .copied()
            .unwrap_or("");
        match merge_key(parent, field) {
            Some(key) if *field == "ports" && key == "port" => {
                ListKind::Map(vec!["port".into(), "protocol".into()])
            }
            Some(key) if *field == "ports" => ListKind::Map(vec![key.into(), "protocol".into()]),
            Some(key) => ListKind::Map(vec![key.into()]),
            None => ListKind::Atomic,
        }
    }
}

/// List types of a custom resource, from its OpenAPI schema.
pub struct SchemaLists<'a>(pub &'a Value);

impl ListTypes for SchemaLists<'_> {
    fn list_kind(&self, path: &[Seg]) -> ListKind {
        let fields_only: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Seg::Field(f) => Some(f.as_str()),
                _ => None,
            })
            .collect();
        if fields_only.first() == Some(&"metadata") {
            return BuiltinLists.list_kind(path);
        }
        let mut schema = self.0;
        for seg in path {
            let next = match seg {
                Seg::Field(f) => schema
                    .get("properties")
                    .and_then(|p| p.get(f))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object())),
                Seg::Key(_) | Seg::Val(_) => schema.get("items"),
            };
            match next {
                Some(next) => schema = next,
                None => return ListKind::Atomic,
            }
        }
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListKind::Map(
                schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Some("set") => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }
}
