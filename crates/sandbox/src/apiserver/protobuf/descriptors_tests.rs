//! The descriptor set `build/` derives from `k8s-pb` and `k8s-openapi`
//! holds the messages, field numbers, types and JSON spellings the walk
//! relies on; a change in either crate that breaks them fails here.

use prost_reflect::{Cardinality, Kind};

use super::pool;

/// `message.field` is number `number`, of this kind and cardinality.
fn field(message: &str, name: &str, number: u32) -> prost_reflect::FieldDescriptor {
    let descriptor = pool()
        .get_message_by_name(message)
        .unwrap_or_else(|| panic!("{message} is in the descriptor set"));
    let field = descriptor
        .get_field_by_name(name)
        .unwrap_or_else(|| panic!("{message} has a field {name}"));
    assert_eq!(field.number(), number, "{message}.{name}");
    field
}

fn message_name(field: &prost_reflect::FieldDescriptor) -> String {
    match field.kind() {
        Kind::Message(message) => message.full_name().to_owned(),
        other => panic!("{} holds {other:?}, not a message", field.full_name()),
    }
}

const CORE: &str = "k8s.io.api.core.v1";
const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

#[test]
fn objects_carry_their_metadata_as_field_one() {
    let metadata = field(&format!("{CORE}.Pod"), "metadata", 1);
    assert_eq!(message_name(&metadata), format!("{META}.ObjectMeta"));
    field(&format!("{CORE}.Pod"), "spec", 2);
    field(&format!("{CORE}.Pod"), "status", 3);
    let object_meta = format!("{META}.ObjectMeta");
    assert_eq!(field(&object_meta, "name", 1).kind(), Kind::String);
    field(&object_meta, "generateName", 2);
    field(&object_meta, "namespace", 3);
    let created = field(&object_meta, "creationTimestamp", 8);
    assert_eq!(message_name(&created), format!("{META}.Time"));
    assert!(field(&object_meta, "labels", 11).is_map());
    assert_eq!(
        field(&object_meta, "finalizers", 14).cardinality(),
        Cardinality::Repeated
    );
}

#[test]
fn secret_data_is_a_map_of_bytes_and_string_data_of_strings() {
    let data = field(&format!("{CORE}.Secret"), "data", 2);
    assert!(data.is_map());
    let Kind::Message(entry) = data.kind() else {
        panic!("a map field holds entries");
    };
    assert_eq!(entry.map_entry_key_field().kind(), Kind::String);
    assert_eq!(entry.map_entry_value_field().kind(), Kind::Bytes);
    field(&format!("{CORE}.Secret"), "type", 3);
    assert!(field(&format!("{CORE}.Secret"), "stringData", 4).is_map());
}

#[test]
fn fields_keep_kubernetes_capitals() {
    let status = format!("{CORE}.PodStatus");
    field(&status, "hostIP", 5);
    field(&status, "podIP", 6);
    let pod_ips = field(&status, "podIPs", 12);
    assert_eq!(message_name(&pod_ips), format!("{CORE}.PodIP"));
    field(&format!("{CORE}.PodSpec"), "hostPID", 12);
    field(
        &format!("{CORE}.PodLogOptions"),
        "insecureSkipTLSVerifyBackend",
        9,
    );
    assert_eq!(
        field(&format!("{META}.FieldsV1"), "Raw", 1).kind(),
        Kind::Bytes
    );
}

#[test]
fn the_special_and_inlined_messages_have_the_fields_the_walk_reads() {
    for (name, number) in [("seconds", 1), ("nanos", 2)] {
        field(super::special::TIME, name, number);
        field(super::special::MICRO_TIME, name, number);
    }
    field(super::special::DURATION, "duration", 1);
    field(super::special::QUANTITY, "string", 1);
    assert_eq!(
        field(super::special::INT_OR_STRING, "type", 1).kind(),
        Kind::Int64
    );
    field(super::special::INT_OR_STRING, "intVal", 2);
    field(super::special::INT_OR_STRING, "strVal", 3);
    field(super::special::RAW_EXTENSION, "raw", 1);
    let source = field(&format!("{CORE}.Volume"), "volumeSource", 2);
    assert_eq!(message_name(&source), format!("{CORE}.VolumeSource"));
    let handler = field(&format!("{CORE}.Probe"), "handler", 1);
    assert_eq!(message_name(&handler), format!("{CORE}.ProbeHandler"));
    let renew = field("k8s.io.api.coordination.v1.LeaseSpec", "renewTime", 4);
    assert_eq!(message_name(&renew), super::special::MICRO_TIME);
}

#[test]
fn the_envelope_and_watch_event_are_described() {
    let unknown = super::UNKNOWN;
    let type_meta = field(unknown, "typeMeta", 1);
    assert_eq!(
        message_name(&type_meta),
        "k8s.io.apimachinery.pkg.runtime.TypeMeta"
    );
    field(unknown, "raw", 2);
    field(unknown, "contentEncoding", 3);
    field(unknown, "contentType", 4);
    field(&format!("{META}.WatchEvent"), "type", 1);
    let object = field(&format!("{META}.WatchEvent"), "object", 2);
    assert_eq!(message_name(&object), super::special::RAW_EXTENSION);
}

#[test]
fn only_the_served_groups_are_described() {
    for (group, kind) in [
        ("events.k8s.io/v1", "Event"),
        ("policy/v1", "PodDisruptionBudget"),
        ("coordination.k8s.io/v1", "Lease"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ] {
        assert!(super::serves(group, kind), "{group} {kind}");
    }
    assert!(!super::serves("apps/v1", "Deployment"));
}
