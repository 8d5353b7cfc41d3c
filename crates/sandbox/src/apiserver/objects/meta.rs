//! Reading and shaping object metadata, shared by every write.

use serde_json::Value;

pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The metadata map of an object the caller has checked is a JSON object.
pub fn meta_mut(object: &mut Value) -> &mut serde_json::Map<String, Value> {
    let metadata = &mut object["metadata"];
    if !metadata.is_object() {
        *metadata = Value::Object(serde_json::Map::new());
    }
    match metadata {
        Value::Object(map) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// Kubernetes omits empty metadata lists and maps.
pub fn normalize_meta(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "finalizers",
            "ownerReferences",
            "labels",
            "annotations",
            "managedFields",
        ] {
            let empty = match meta.get(field) {
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                meta.remove(field);
            }
        }
    }
}

/// Everything that is not metadata or status: what `generation` tracks.
pub fn content(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        for field in ["metadata", "status", "apiVersion", "kind"] {
            map.remove(field);
        }
    }
    copy
}

/// The object without what changes on every write, to find no-op writes.
pub fn without_volatile(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("time");
            }
        }
    }
    copy
}

pub fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Five characters kube-apiserver would use for `generateName` and token
/// volume names: consonants and digits that spell no word.
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}
