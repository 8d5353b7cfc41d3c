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

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::patch::merge_key;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    Field(String),
    /// An element of an associative list, by its key fields (sorted JSON).
    Key(String),
    /// An element of a set, by value (JSON).
    Val(String),
}

pub type Path = Vec<Seg>;
pub type FieldSet = BTreeSet<Path>;

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

/// Which part of an object a write may touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The whole object (no status subresource).
    Whole,
    /// Everything but `status` (main resource of a kind with a status
    /// subresource).
    Main,
    /// Only `status`.
    Status,
}

fn ignored(path: &[Seg], scope: Scope) -> bool {
    let Some(Seg::Field(first)) = path.first() else {
        return false;
    };
    match first.as_str() {
        "apiVersion" | "kind" => return true,
        "metadata" => {
            if let Some(Seg::Field(second)) = path.get(1) {
                return matches!(
                    second.as_str(),
                    "name"
                        | "namespace"
                        | "uid"
                        | "resourceVersion"
                        | "generation"
                        | "creationTimestamp"
                        | "managedFields"
                        | "deletionTimestamp"
                        | "deletionGracePeriodSeconds"
                        | "selfLink"
                        | "generateName"
                ) || scope == Scope::Status;
            }
            return true;
        }
        _ => {}
    }
    match scope {
        Scope::Whole => false,
        Scope::Main => first == "status",
        Scope::Status => first != "status",
    }
}

fn key_of(item: &Value, keys: &[String]) -> Option<String> {
    let mut parts = Vec::new();
    for key in keys {
        if let Some(v) = item.get(key) {
            parts.push(format!("{}:{}", Value::String(key.clone()), v));
        }
    }
    if parts.is_empty() {
        return None;
    }
    parts.sort();
    Some(format!("{{{}}}", parts.join(",")))
}

/// The leaf fields (and associative-list elements) set in `value`.
pub fn fields_of(value: &Value, types: &dyn ListTypes, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    collect(value, &mut Vec::new(), types, &mut out);
    out.retain(|p| !ignored(p, scope));
    out
}

fn collect(value: &Value, path: &mut Path, types: &dyn ListTypes, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                path.push(Seg::Field(key.clone()));
                collect(child, path, types, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match types.list_kind(path) {
            ListKind::Map(keys) => {
                let mut whole = false;
                for item in items {
                    match key_of(item, &keys) {
                        Some(id) => {
                            path.push(Seg::Key(id));
                            out.insert(path.clone());
                            collect(item, path, types, out);
                            path.pop();
                        }
                        None => whole = true,
                    }
                }
                if whole {
                    out.insert(path.clone());
                }
            }
            ListKind::Set => {
                for item in items {
                    path.push(Seg::Val(item.to_string()));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

fn get<'v>(value: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    let mut current = value;
    for seg in path {
        current = match seg {
            Seg::Field(f) => current.get(f)?,
            Seg::Key(id) => current
                .as_array()?
                .iter()
                .find(|item| item_matches_key(item, id))?,
            Seg::Val(v) => current
                .as_array()?
                .iter()
                .find(|item| item.to_string() == *v)?,
        };
    }
    Some(current)
}

fn item_matches_key(item: &Value, id: &str) -> bool {
    let Ok(Value::Object(wanted)) = serde_json::from_str::<Value>(id) else {
        return false;
    };
    wanted.iter().all(|(k, v)| item.get(k) == Some(v))
}

fn remove(value: &mut Value, path: &[Seg]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for seg in parents {
        let next = match seg {
            Seg::Field(f) => current.get_mut(f),
            Seg::Key(id) => current
                .as_array_mut()
                .and_then(|items| items.iter_mut().find(|item| item_matches_key(item, id))),
            Seg::Val(v) => current
                .as_array_mut()
                .and_then(|items| items.iter_mut().find(|item| item.to_string() == *v)),
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    match last {
        Seg::Field(f) => {
            if let Some(map) = current.as_object_mut() {
                map.remove(f);
            }
        }
        Seg::Key(id) => {
            if let Some(items) = current.as_array_mut() {
                items.retain(|item| !item_matches_key(item, id));
            }
        }
        Seg::Val(v) => {
            if let Some(items) = current.as_array_mut() {
                items.retain(|item| item.to_string().as_str() != v.as_str());
            }
        }
    }
}

/// Serialises a field set as FieldsV1 (`{"f:spec":{"f:replicas":{}}}`).
pub fn to_fields_v1(set: &FieldSet) -> Value {
    fn name(seg: &Seg) -> String {
        match seg {
            Seg::Field(f) => format!("f:{f}"),
            Seg::Key(k) => format!("k:{k}"),
            Seg::Val(v) => format!("v:{v}"),
        }
    }
    let mut root = json!({});
    for path in set {
        let mut node = &mut root;
        for seg in path {
            let Some(map) = node.as_object_mut() else {
                break;
            };
            node = map.entry(name(seg)).or_insert_with(|| json!({}));
        }
    }
    // A path that is owned itself and also has owned children is marked
    // with ".".
    for path in set {
        let mut pointer = String::new();
        for seg in path {
            pointer.push('/');
            pointer.push_str(&name(seg).replace('~', "~0").replace('/', "~1"));
        }
        if let Some(map) = root.pointer_mut(&pointer).and_then(Value::as_object_mut)
            && !map.is_empty()
            && !path.is_empty()
        {
            map.insert(".".into(), json!({}));
        }
    }
    root
}

/// Parses FieldsV1 back into a set.
pub fn from_fields_v1(value: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    walk_v1(value, &mut Vec::new(), &mut out);
    out
}

fn walk_v1(value: &Value, path: &mut Path, out: &mut FieldSet) {
    let Some(map) = value.as_object() else {
        return;
    };
    if (map.is_empty() || map.contains_key(".")) && !path.is_empty() {
        out.insert(path.clone());
    }
    for (name, child) in map {
        let seg = if let Some(f) = name.strip_prefix("f:") {
            Seg::Field(f.to_owned())
        } else if let Some(k) = name.strip_prefix("k:") {
            Seg::Key(k.to_owned())
        } else if let Some(v) = name.strip_prefix("v:") {
            Seg::Val(v.to_owned())
        } else {
            continue;
        };
        path.push(seg);
        walk_v1(child, path, out);
        path.pop();
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub subresource: String,
    pub api_version: String,
    pub time: String,
    pub fields: FieldSet,
}

pub fn read_entries(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| Entry {
                    manager: str_of(e, "manager"),
                    operation: str_of(e, "operation"),
                    subresource: str_of(e, "subresource"),
                    api_version: str_of(e, "apiVersion"),
                    time: str_of(e, "time"),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn str_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

pub fn write_entries(object: &mut Value, entries: &[Entry]) {
    let rendered: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                entry["subresource"] = json!(e.subresource);
            }
            entry
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if rendered.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(rendered));
        }
    }
}

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
        .filter(|p| old.and_then(|o| get(o, p)) != get(new, p))
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
    let mut conflicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in &entries {
        if entry.manager == write.manager && entry.operation == "Apply" {
            continue;
        }
        for path in entry.fields.intersection(&applied) {
            if get(current, path) != get(config, path) {
                conflicts
                    .entry(entry.manager.clone())
                    .or_default()
                    .push(render_path(path));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let causes: Vec<Cause> = conflicts
            .iter()
            .flat_map(|(manager, paths)| {
                paths.iter().map(move |p| Cause {
                    field: p.clone(),
                    message: format!("conflict with \"{manager}\""),
                    reason: "FieldManagerConflict",
                })
            })
            .collect();
        let count = causes.len();
        let listing: Vec<String> = causes
            .iter()
            .map(|c| format!("- {}: {}", c.message, c.field))
            .collect();
        return Err(ApiError::Conflict {
            kind: kind.to_owned(),
            name: name.to_owned(),
            message: format!(
                "Apply failed with {count} conflict{}: {}",
                if count == 1 { "" } else { "s" },
                listing.join("\n")
            ),
        });
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

/// `.spec.containers[name="a"].image`, as Kubernetes prints field paths in
/// conflicts.
pub fn render_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Seg::Key(k) => {
                let inner = serde_json::from_str::<Value>(k)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                out.push_str(&format!("[{inner}]"));
            }
            Seg::Val(v) => out.push_str(&format!("[{v}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write<'a>(manager: &'a str) -> Write<'a> {
        Write {
            manager,
            subresource: "",
            api_version: "v1",
            scope: Scope::Whole,
            time: "2026-01-01T00:00:00Z",
            types: &BuiltinLists,
        }
    }

    #[test]
    fn fields_v1_round_trips_with_keyed_elements() {
        let object = json!({"spec": {"containers": [{"name": "a", "image": "x"}]}, "metadata": {"labels": {"l": "1"}}});
        let set = fields_of(&object, &BuiltinLists, Scope::Whole);
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]["f:image"],
            json!({})
        );
        assert!(
            v1["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]
                .get(".")
                .is_some()
        );
        assert_eq!(from_fields_v1(&v1), set);
    }

    #[test]
    fn apply_removes_list_elements_a_manager_stops_applying() {
        let config = |names: &[&str]| {
            let containers: Vec<Value> = names
                .iter()
                .map(|n| json!({"name": n, "image": format!("{n}:1")}))
                .collect();
            json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
        };
        let two = apply(
            &json!({"metadata": {"name": "p"}}),
            &config(&["a", "b"]),
            &write("ctl"),
            false,
            "Pod",
            "p",
        )
        .expect("first apply");
        let one =
            apply(&two, &config(&["a"]), &write("ctl"), false, "Pod", "p").expect("second apply");
        assert_eq!(
            one["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}])
        );
        // An element another manager also owns stays.
        let mut shared = two.clone();
        let mut entries = read_entries(&shared);
        entries.push(Entry {
            manager: "other".into(),
            operation: "Update".into(),
            subresource: String::new(),
            api_version: "v1".into(),
            time: String::new(),
            fields: fields_of(
                &json!({"spec": {"containers": [{"name": "b"}]}}),
                &BuiltinLists,
                Scope::Whole,
            ),
        });
        write_entries(&mut shared, &entries);
        let kept =
            apply(&shared, &config(&["a"]), &write("ctl"), false, "Pod", "p").expect("apply");
        assert_eq!(kept["spec"]["containers"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn apply_conflicts_unless_forced_and_removes_dropped_fields() {
        let first = apply(
            &json!({"metadata": {"name": "x"}}),
            &json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}}),
            &write("one"),
            false,
            "ConfigMap",
            "x",
        )
        .expect("first apply");
        let conflict = apply(
            &first,
            &json!({"metadata": {"name": "x", "labels": {"a": "9"}}}),
            &write("two"),
            false,
            "ConfigMap",
            "x",
        );
        assert!(matches!(conflict, Err(ApiError::Conflict { .. })));
        let forced = apply(
            &first,
            &json!({"metadata": {"name": "x", "labels": {"a": "9"}}}),
            &write("two"),
            true,
            "ConfigMap",
            "x",
        )
        .expect("forced apply");
        assert_eq!(forced["metadata"]["labels"]["a"], "9");
        let dropped = apply(
            &forced,
            &json!({"metadata": {"name": "x"}}),
            &write("one"),
            false,
            "ConfigMap",
            "x",
        )
        .expect("apply without b");
        assert_eq!(dropped["metadata"]["labels"], json!({"a": "9"}));
    }
}
