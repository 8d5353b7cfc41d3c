//! Field sets: the fields an object sets, reading and removing a field by
//! path, and the FieldsV1 form stored in `metadata.managedFields`.

use serde_json::{Value, json};

use crate::apiserver::apply::lists::{ListKind, ListTypes};
use crate::apiserver::apply::path::{FieldSet, Path, Seg};
use crate::apiserver::apply::values::same;

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

pub fn ignored(path: &[Seg], scope: Scope) -> bool {
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

pub fn key_of(item: &Value, keys: &[String]) -> Option<String> {
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

pub fn collect(value: &Value, path: &mut Path, types: &dyn ListTypes, out: &mut FieldSet) {
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

pub fn get<'v>(value: &'v Value, path: &[Seg]) -> Option<&'v Value> {
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

pub fn item_matches_key(item: &Value, id: &str) -> bool {
    let Ok(Value::Object(wanted)) = serde_json::from_str::<Value>(id) else {
        return false;
    };
    wanted
        .iter()
        .all(|(k, v)| item.get(k).is_some_and(|found| same(found, v)))
}

pub fn remove(value: &mut Value, path: &[Seg]) {
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

pub fn walk_v1(value: &Value, path: &mut Path, out: &mut FieldSet) {
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
