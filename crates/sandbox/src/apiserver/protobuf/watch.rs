//! Watch events in protobuf, as kube-apiserver streams them for
//! `application/vnd.kubernetes.protobuf;stream=watch`: each frame is a
//! four-byte big-endian length and a `meta.v1.WatchEvent` message (no
//! prefix or envelope), whose object is the full protobuf body (prefix
//! and `runtime.Unknown`) of the watched object.

use prost::Message as _;
use prost_reflect::{DynamicMessage, Kind, Value as Proto};
use serde_json::Value;

use super::{META_V1, ProtobufError, decode, encode, pool};

/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

fn event_descriptor() -> Option<prost_reflect::MessageDescriptor> {
    pool().get_message_by_name(&format!("{META_V1}.WatchEvent"))
}

/// One JSON watch event (`{"type": ..., "object": ...}`) as a protobuf
/// frame; `None` when the object has no protobuf form.
pub fn frame(event: &Value) -> Option<Vec<u8>> {
    let type_ = event.get("type")?.as_str()?;
    let object = encode(event.get("object")?)?;
    let descriptor = event_descriptor()?;
    let object_field = descriptor.get_field_by_name("object")?;
    let Kind::Message(raw_extension) = object_field.kind() else {
        return None;
    };
    let mut raw = DynamicMessage::new(raw_extension);
    raw.set_field_by_name("raw", Proto::Bytes(object.into()));
    let mut message = DynamicMessage::new(descriptor);
    message.set_field_by_name("type", Proto::String(type_.to_owned()));
    message.set_field(&object_field, Proto::Message(raw));
    let body = message.encode_to_vec();
    let mut out = u32::try_from(body.len()).ok()?.to_be_bytes().to_vec();
    out.extend(body);
    Some(out)
}

/// A frame's event (without its length prefix) as its type and the JSON
/// object: what a protobuf watch client reads.
pub fn read_event(body: &[u8]) -> Result<(String, Value), ProtobufError> {
    let envelope = |e: String| ProtobufError::Envelope(e);
    let descriptor = event_descriptor().ok_or_else(|| envelope("no WatchEvent".into()))?;
    let message = DynamicMessage::decode(descriptor, body).map_err(|e| envelope(e.to_string()))?;
    let type_ = match message.get_field_by_name("type").as_deref() {
        Some(Proto::String(text)) => text.clone(),
        _ => String::new(),
    };
    let raw = match message.get_field_by_name("object").as_deref() {
        Some(Proto::Message(raw)) => match raw.get_field_by_name("raw").as_deref() {
            Some(Proto::Bytes(bytes)) => bytes.to_vec(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    Ok((type_, decode(&raw, "", "")?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_frame_is_a_length_and_an_event_around_the_object() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "5"}, "data": {"k": "v"}});
        let frame = frame(&json!({"type": "ADDED", "object": object})).expect("a frame");
        let length = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(length, frame.len() - 4);
        assert_eq!(read_event(&frame[4..]), Ok(("ADDED".to_owned(), object)));
    }

    #[test]
    fn custom_resources_have_no_frames() {
        let event =
            json!({"type": "ADDED", "object": {"apiVersion": "example.com/v1", "kind": "Widget"}});
        assert_eq!(frame(&event), None);
    }
}
