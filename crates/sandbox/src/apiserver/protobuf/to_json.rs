//! A decoded protobuf message as the JSON object Kubernetes would write
//! for it: field names as declared (the protobuf names are the JSON
//! names), 64-bit integers as numbers, bytes in base64, the special
//! types of [`super::special`] in their JSON forms, and inlined structs
//! merged into their parent.
//!
//! A Go encoder writes every non-pointer field, zero or not; empty
//! strings and zero timestamps are left out here as Go's `omitempty`
//! would, so that defaulting sees them as unset.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value as Proto,
};
use serde_json::{Map, Value, json};

use super::special::{self, ZERO_TIME_SECONDS};

pub fn message(message: &DynamicMessage) -> Value {
    match message.descriptor().full_name() {
        special::TIME => time(message, false),
        special::MICRO_TIME => time(message, true),
        special::DURATION => json!(special::format_duration(int(message, "duration"))),
        special::QUANTITY => json!(string(message, "string")),
        special::INT_OR_STRING => int_or_string(message),
        special::RAW_EXTENSION => raw_json(message, "raw"),
        special::FIELDS_V1 => raw_json(message, "Raw"),
        _ => Value::Object(object(message)),
    }
}

fn object(message: &DynamicMessage) -> Map<String, Value> {
    let mut out = Map::new();
    for (field, value) in message.fields() {
        if special::inlined(&field).is_some()
            && let Proto::Message(inner) = value
        {
            out.extend(object(inner));
            continue;
        }
        if let Some(json) = field_value(&field, value) {
            out.insert(field.name().to_owned(), json);
        }
    }
    out
}

fn field_value(field: &FieldDescriptor, value: &Proto) -> Option<Value> {
    match value {
        Proto::List(items) if items.is_empty() => None,
        Proto::List(items) => Some(Value::Array(
            items.iter().filter_map(|item| single(item, true)).collect(),
        )),
        Proto::Map(entries) if entries.is_empty() => None,
        Proto::Map(entries) => {
            let value_field = match field.kind() {
                Kind::Message(entry) => entry.map_entry_value_field(),
                _ => return None,
            };
            let mut out = Map::new();
            for (key, value) in entries {
                let key = match key {
                    MapKey::String(text) => text.clone(),
                    other => format!("{other:?}"),
                };
                let keep_empty = !matches!(value_field.kind(), Kind::Message(_));
                if let Some(value) = single(value, keep_empty) {
                    out.insert(key, value);
                }
            }
            Some(Value::Object(out))
        }
        other => single(other, false),
    }
}

/// One value; `keep_empty` keeps empty strings (list items and map values
/// are data, not unset fields).
fn single(value: &Proto, keep_empty: bool) -> Option<Value> {
    Some(match value {
        Proto::Bool(b) => json!(b),
        Proto::I32(n) | Proto::EnumNumber(n) => json!(n),
        Proto::I64(n) => json!(n),
        Proto::U32(n) => json!(n),
        Proto::U64(n) => json!(n),
        Proto::F32(n) => json!(n),
        Proto::F64(n) => json!(n),
        Proto::String(text) if text.is_empty() && !keep_empty => return None,
        Proto::String(text) => json!(text),
        Proto::Bytes(bytes) => json!(STANDARD.encode(bytes)),
        Proto::Message(inner) => {
            let value = message(inner);
            if value.is_null() {
                return None;
            }
            value
        }
        Proto::List(_) | Proto::Map(_) => return None,
    })
}

fn int(message: &DynamicMessage, name: &str) -> i64 {
    match message.get_field_by_name(name).as_deref() {
        Some(Proto::I64(n)) => *n,
        Some(Proto::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn string(message: &DynamicMessage, name: &str) -> String {
    match message.get_field_by_name(name).as_deref() {
        Some(Proto::String(text)) => text.clone(),
        _ => String::new(),
    }
}

fn time(message: &DynamicMessage, micro: bool) -> Value {
    let seconds = int(message, "seconds");
    let nanos = i32::try_from(int(message, "nanos")).unwrap_or(0);
    let unset = !message.has_field_by_name("seconds") && !message.has_field_by_name("nanos");
    if unset || (seconds == ZERO_TIME_SECONDS && nanos == 0) {
        return Value::Null;
    }
    special::format_time(seconds, nanos, micro).map_or(Value::Null, Value::String)
}

fn int_or_string(message: &DynamicMessage) -> Value {
    if int(message, "type") == 1 {
        json!(string(message, "strVal"))
    } else {
        json!(int(message, "intVal"))
    }
}

/// Bytes holding JSON (a raw extension, managed fields): the JSON value,
/// or the bytes in base64 when they are not JSON.
fn raw_json(message: &DynamicMessage, name: &str) -> Value {
    let Some(Proto::Bytes(bytes)) = message.get_field_by_name(name).as_deref().cloned() else {
        return Value::Null;
    };
    serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(STANDARD.encode(&bytes)))
}
