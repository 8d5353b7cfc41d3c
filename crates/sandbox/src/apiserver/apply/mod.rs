//! Server-side apply and `metadata.managedFields`.
//!
//! Each manager owns a set of fields (FieldsV1). Applying a configuration
//! makes its manager own exactly the fields it sets; fields another manager
//! owns with a different value are conflicts (409) unless the apply is
//! forced, which moves ownership; fields the manager applied before and no
//! longer applies are removed when nobody else owns them. Ordinary writes
//! (create, update, other patches) are recorded as `Update` operations that
//! take ownership of the fields they change.
//!
//! Lists follow their declared type: associative lists (containers by name,
//! CRD lists with `x-kubernetes-list-type: map`) are owned per element,
//! sets per value, and every other list as one atomic value.

mod conflicts;
mod fields;
mod lists;
mod managed;
mod path;
#[cfg(test)]
mod tests;
mod values;

use serde_json::Value;

use crate::apiserver::error::ApiError;
pub use fields::{Scope, fields_of, from_fields_v1, to_fields_v1};
use fields::{get, ignored, item_matches_key, key_of, remove};
pub use lists::{BuiltinLists, ListKind, ListTypes, SchemaLists};
pub use managed::{Entry, read_entries, write_entries};
pub use path::{FieldSet, Path, Seg, render_path};

/// What one write looks like to field management.
pub struct Write<'a> {
    pub manager: &'a str,
    pub subresource: &'a str,
    pub api_version: &'a str,
    pub scope: Scope,
    pub time: &'a str,
    pub types: &'a dyn ListTypes,
}

/// Records an ordinary (non-apply) write: the manager takes the fields that
/// changed; fields that disappeared are nobody's any more.
pub fn record_update(old: Option<&Value>, new: &mut Value, write: &Write<'_>) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let new_fields = fields_of(new, write.types, write.scope);
    let changed: FieldSet = new_fields
        .iter()
        .filter(|p| !values::same_option(old.and_then(|o| get(o, p)), get(new, p)))
        .cloned()
        .collect();
    let all_new = fields_of(new, write.types, Scope::Whole);
    for entry in &mut entries {
        entry.fields.retain(|p| all_new.contains(p));
        if !(entry.manager == write.manager && entry.operation == "Update") {
            entry.fields.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| {
            e.manager == write.manager
                && e.operation == "Update"
                && e.subresource == write.subresource
        }) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = write.time.to_owned();
            }
            None => entries.push(Entry {
                manager: write.manager.to_owned(),
                operation: "Update".into(),
                subresource: write.subresource.to_owned(),
                api_version: write.api_version.to_owned(),
                time: write.time.to_owned(),
                fields: changed,
            }),
        }
    }
    write_entries(new, &entries);
}

/// Applies `config` over `current` for `write.manager`.
pub fn apply(
    current: &Value,
    config: &Value,
    write: &Write<'_>,
    force: bool,
    kind: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let mut entries = read_entries(current);
    let applied = fields_of(config, write.types, write.scope);
    let conflicts = conflicts::find(&entries, current, config, &applied, write.manager);
    if !conflicts.is_empty() && !force {
        return Err(conflicts::error(&conflicts, kind, name));
    }
    if force {
        for entry in &mut entries {
            if !(entry.manager == write.manager && entry.operation == "Apply") {
                entry.fields.retain(|p| !applied.contains(p));
            }
        }
    }
    let previous: FieldSet = entries
        .iter()
        .find(|e| {
            e.manager == write.manager
                && e.operation == "Apply"
                && e.subresource == write.subresource
        })
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut merged = current.clone();
    // Remove what this manager stopped applying and nobody else owns; whole
    // list elements first, while their keys still identify them.
    let mut dropped: Vec<&Path> = previous.difference(&applied).collect();
    dropped.sort_by_key(|p| p.len());
    for path in dropped {
        let owned_elsewhere = entries.iter().any(|e| {
            !(e.manager == write.manager && e.operation == "Apply")
                && e.fields.iter().any(|p| p.starts_with(path))
        });
        let still_applied = applied.iter().any(|p| p.starts_with(path));
        if !owned_elsewhere && !still_applied {
            remove(&mut merged, path);
        }
    }
    merge_config(
        &mut merged,
        config,
        &mut Vec::new(),
        write.types,
        write.scope,
    );
    prune_empty_parents(&mut merged, &previous, &applied);
    entries.retain(|e| {
        !(e.manager == write.manager
            && e.operation == "Apply"
            && e.subresource == write.subresource)
    });
    entries.push(Entry {
        manager: write.manager.to_owned(),
        operation: "Apply".into(),
        subresource: write.subresource.to_owned(),
        api_version: write.api_version.to_owned(),
        time: write.time.to_owned(),
        fields: applied,
    });
    write_entries(&mut merged, &entries);
    Ok(merged)
}

/// After removing fields, maps that only existed to hold them go too.
fn prune_empty_parents(object: &mut Value, previous: &FieldSet, applied: &FieldSet) {
    for path in previous.difference(applied) {
        for len in (1..path.len()).rev() {
            let parent = &path[..len];
            if matches!(get(object, parent), Some(Value::Object(m)) if m.is_empty())
                && !applied.iter().any(|p| p.starts_with(parent))
            {
                remove(object, parent);
            }
        }
    }
}

fn merge_config(
    target: &mut Value,
    config: &Value,
    path: &mut Path,
    types: &dyn ListTypes,
    scope: Scope,
) {
    match (target, config) {
        (Value::Object(target), Value::Object(config)) => {
            for (key, value) in config {
                path.push(Seg::Field(key.clone()));
                if ignored(path, scope)
                    && !(path.len() == 1
                        && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
                {
                    path.pop();
                    continue;
                }
                match target.get_mut(key) {
                    Some(existing) => merge_config(existing, value, path, types, scope),
                    None => {
                        target.insert(key.clone(), value.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(target), Value::Array(config)) => match types.list_kind(path) {
            ListKind::Map(keys) => {
                for item in config {
                    let id = key_of(item, &keys);
                    let position = id
                        .as_ref()
                        .and_then(|id| target.iter().position(|t| item_matches_key(t, id)));
                    match position {
                        Some(index) => {
                            if let Some(id) = id {
                                path.push(Seg::Key(id));
                                merge_config(&mut target[index], item, path, types, scope);
                                path.pop();
                            }
                        }
                        None => target.push(item.clone()),
                    }
                }
            }
            ListKind::Set => {
                for item in config {
                    if !target.contains(item) {
                        target.push(item.clone());
                    }
                }
            }
            ListKind::Atomic => *target = config.clone(),
        },
        (target, config) => *target = config.clone(),
    }
}
