//! A JSON object as the protobuf message Kubernetes would write for it:
//! the inverse of [`super::to_json`]. Fields the message does not declare
//! are left out, as a protobuf encoder of that version would.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use prost::bytes::Bytes;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage,
    Value as Proto,
};
use serde_json::Value;

use super::special;

pub fn message(descriptor: &MessageDescriptor, json: &Value) -> DynamicMessage {
    let mut out = DynamicMessage::new(descriptor.clone());
    match descriptor.full_name() {
        special::TIME | special::MICRO_TIME => {
            if let Some((seconds, nanos)) = json.as_str().and_then(special::parse_time) {
                set(&mut out, "seconds", Proto::I64(seconds));
                set(&mut out, "nanos", Proto::I32(nanos));
            }
        }
        special::DURATION => {
            if let Some(nanos) = json.as_str().and_then(special::parse_duration) {
                set(&mut out, "duration", Proto::I64(nanos));
            }
        }
        special::QUANTITY => set(&mut out, "string", Proto::String(plain_text(json))),
        special::INT_OR_STRING => int_or_string(&mut out, json),
        special::RAW_EXTENSION => set(&mut out, "raw", Proto::Bytes(json_bytes(json))),
        special::FIELDS_V1 => set(&mut out, "Raw", Proto::Bytes(json_bytes(json))),
        _ => fill(&mut out, json),
    }
    out
}

fn fill(out: &mut DynamicMessage, json: &Value) {
    let Some(object) = json.as_object() else {
        return;
    };
    for field in out.descriptor().fields() {
        if let Some(inner) = special::inlined(&field) {
            let inner = message(&inner, json);
            if inner.fields().next().is_some() {
                out.set_field(&field, Proto::Message(inner));
            }
            continue;
        }
        let Some(value) = object.get(field.name()).filter(|v| !v.is_null()) else {
            continue;
        };
        if let Some(value) = field_value(&field, value) {
            out.set_field(&field, value);
        }
    }
}

fn field_value(field: &FieldDescriptor, json: &Value) -> Option<Proto> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return None;
        };
        let value_field = entry.map_entry_value_field();
        let entries = json
            .as_object()?
            .iter()
            .filter_map(|(key, value)| {
                Some((
                    MapKey::String(key.clone()),
                    scalar(&value_field.kind(), value)?,
                ))
            })
            .collect();
        return Some(Proto::Map(entries));
    }
    if field.is_list() {
        let items = json
            .as_array()?
            .iter()
            .filter_map(|item| scalar(&field.kind(), item))
            .collect();
        return Some(Proto::List(items));
    }
    scalar(&field.kind(), json)
}

fn scalar(kind: &Kind, json: &Value) -> Option<Proto> {
    Some(match kind {
        Kind::Bool => Proto::Bool(json.as_bool()?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Proto::I32(i32::try_from(json.as_i64()?).ok()?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Proto::I64(json.as_i64()?),
        Kind::Uint32 | Kind::Fixed32 => Proto::U32(u32::try_from(json.as_u64()?).ok()?),
        Kind::Uint64 | Kind::Fixed64 => Proto::U64(json.as_u64()?),
        Kind::Float => Proto::F32(json.as_f64()? as f32),
        Kind::Double => Proto::F64(json.as_f64()?),
        Kind::String => Proto::String(json.as_str()?.to_owned()),
        Kind::Bytes => Proto::Bytes(Bytes::from(STANDARD.decode(json.as_str()?).ok()?)),
        Kind::Enum(_) => Proto::EnumNumber(i32::try_from(json.as_i64()?).ok()?),
        Kind::Message(descriptor) => Proto::Message(message(descriptor, json)),
    })
}

fn set(out: &mut DynamicMessage, name: &str, value: Proto) {
    if let Some(field) = out.descriptor().get_field_by_name(name) {
        out.set_field(&field, value);
    }
}

/// A quantity's text: JSON carries it as a string, or as a bare number.
fn plain_text(json: &Value) -> String {
    match json {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn int_or_string(out: &mut DynamicMessage, json: &Value) {
    match json {
        Value::String(text) => {
            set(out, "type", Proto::I64(1));
            set(out, "strVal", Proto::String(text.clone()));
        }
        other => {
            set(out, "type", Proto::I64(0));
            let number = other
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0);
            set(out, "intVal", Proto::I32(number));
        }
    }
}

fn json_bytes(json: &Value) -> Bytes {
    Bytes::from(json.to_string().into_bytes())
}
