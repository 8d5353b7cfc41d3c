//! `application/vnd.kubernetes.protobuf` bodies of built-in kinds.
//!
//! A protobuf body is the four bytes `k8s\0` followed by a
//! `runtime.Unknown` envelope: the object's `apiVersion` and `kind`, and
//! the typed message as raw bytes. The messages are described by a
//! descriptor set `build/` derives from the published `k8s-pb` crate
//! (messages, field numbers and types) and `k8s-openapi` (the JSON
//! spelling of each field, which Kubernetes uses as the proto field
//! name), matching Kubernetes' `generated.proto` files; [`to_json`] and
//! [`from_json`] walk a message by its descriptor, so every served
//! built-in kind is covered without code per kind. Custom resources have
//! no protobuf form: the real server reads and writes them as JSON only,
//! and so does the sandbox.

mod from_json;
mod special;
mod to_json;
mod watch;

pub use watch::{WATCH_MEDIA_TYPE, frame, read_event};

use std::sync::OnceLock;

use prost::Message as _;
use prost::bytes::Bytes;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage, Value as Proto,
};
use serde_json::{Value, json};

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";

const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// Why a protobuf body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    #[error(
        "the protobuf body does not start with the Kubernetes prefix \"k8s\\x00\" (found {found:?}); send {MEDIA_TYPE} bodies as client-go encodes them"
    )]
    Magic { found: Vec<u8> },
    #[error("the protobuf envelope (runtime.Unknown) cannot be decoded: {0}")]
    Envelope(String),
    #[error("the protobuf envelope has contentEncoding {0:?}; only unencoded bodies are read")]
    ContentEncoding(String),
    #[error("{kind} of {api_version} has no protobuf form in this server")]
    NoMessage { api_version: String, kind: String },
    #[error("the protobuf body of {kind} cannot be decoded: {message}")]
    Message { kind: String, message: String },
}

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let bytes = include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.descriptors"));
        // The descriptors are derived by build/ from pinned dependencies;
        // failing to read them is a build defect, not input.
        DescriptorPool::decode(bytes.as_slice()).expect("descriptor set derived by build/")
    })
}

/// The protobuf message of a kind: `k8s.io.api.<group>.<version>.<Kind>`,
/// where `<group>` is the first label of the API group (`core` for the
/// core group), or a `meta.k8s.io` type such as `Status`.
pub fn descriptor(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let package = match group {
        "" => "core",
        other => other.split('.').next().unwrap_or(other),
    };
    pool()
        .get_message_by_name(&format!("k8s.io.api.{package}.{version}.{kind}"))
        .or_else(|| pool().get_message_by_name(&format!("{META_V1}.{kind}")))
}

/// Whether objects of this kind can be written in protobuf.
pub fn serves(api_version: &str, kind: &str) -> bool {
    descriptor(api_version, kind).is_some()
}

/// A protobuf request body as the JSON object the write path takes, with
/// `apiVersion` and `kind` from the envelope (or the ones given, when the
/// envelope leaves them empty).
pub fn decode(body: &[u8], api_version: &str, kind: &str) -> Result<Value, ProtobufError> {
    let Some(envelope) = body.strip_prefix(MAGIC.as_slice()) else {
        return Err(ProtobufError::Magic {
            found: body.iter().take(4).copied().collect(),
        });
    };
    let unknown = unknown_descriptor();
    let unknown = DynamicMessage::decode(unknown, envelope)
        .map_err(|e| ProtobufError::Envelope(e.to_string()))?;
    let encoding = text_field(&unknown, "contentEncoding");
    if !encoding.is_empty() {
        return Err(ProtobufError::ContentEncoding(encoding));
    }
    let type_meta = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(Proto::Message(meta)) => meta.clone(),
        _ => DynamicMessage::new(unknown.descriptor()),
    };
    let api_version = non_empty(text_field(&type_meta, "apiVersion"), api_version);
    let kind = non_empty(text_field(&type_meta, "kind"), kind);
    let descriptor = descriptor(&api_version, &kind).ok_or_else(|| ProtobufError::NoMessage {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(Proto::Bytes(raw)) => raw.clone(),
        _ => Bytes::new(),
    };
    let message = DynamicMessage::decode(descriptor, raw).map_err(|e| ProtobufError::Message {
        kind: kind.clone(),
        message: e.to_string(),
    })?;
    let mut object = to_json::message(&message);
    if let Some(fields) = object.as_object_mut() {
        fields.insert("apiVersion".into(), json!(api_version));
        fields.insert("kind".into(), json!(kind));
    }
    Ok(object)
}

/// A JSON object (or list, or `Status`) as a protobuf body, when its kind
/// has a protobuf form.
pub fn encode(object: &Value) -> Option<Vec<u8>> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let message = from_json::message(&descriptor(api_version, kind)?, object);
    let unknown = unknown_descriptor();
    let mut type_meta = match unknown.get_field_by_name("typeMeta")?.kind() {
        prost_reflect::Kind::Message(meta) => DynamicMessage::new(meta),
        _ => return None,
    };
    type_meta.set_field_by_name("apiVersion", Proto::String(api_version.to_owned()));
    type_meta.set_field_by_name("kind", Proto::String(kind.to_owned()));
    let mut envelope = DynamicMessage::new(unknown);
    envelope.set_field_by_name("typeMeta", Proto::Message(type_meta));
    envelope.set_field_by_name("raw", Proto::Bytes(message.encode_to_vec().into()));
    let mut out = MAGIC.to_vec();
    out.extend(envelope.encode_to_vec());
    Some(out)
}

fn unknown_descriptor() -> MessageDescriptor {
    // Part of the compiled runtime package; see `pool`.
    pool()
        .get_message_by_name(UNKNOWN)
        .expect("runtime.Unknown is in the descriptor set")
}

fn text_field(message: &DynamicMessage, name: &str) -> String {
    match message.get_field_by_name(name).as_deref() {
        Some(Proto::String(text)) => text.clone(),
        _ => String::new(),
    }
}

fn non_empty(value: String, fallback: &str) -> String {
    if value.is_empty() {
        fallback.to_owned()
    } else {
        value
    }
}

#[cfg(test)]
mod descriptors_tests;
#[cfg(test)]
mod tests;
