use serde_json::json;

use super::*;

#[test]
fn a_secret_round_trips_with_its_bytes_in_base64() {
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "db",
            "namespace": "default",
            "labels": {"app": "pg"},
            "creationTimestamp": "2024-05-01T10:00:00Z",
        },
        "type": "Opaque",
        "data": {"password": "c2VjcmV0", "empty": ""},
    });
    let bytes = encode(&secret).expect("Secret has a protobuf form");
    assert_eq!(&bytes[..4], MAGIC);
    assert_eq!(decode(&bytes, "v1", "Secret"), Ok(secret));
}

#[test]
fn special_types_keep_their_json_forms() {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "deletionGracePeriodSeconds": 30},
        "spec": {
            "containers": [{
                "name": "pg",
                "image": "postgres:17",
                "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                "readinessProbe": {
                    "httpGet": {"path": "/ready", "port": "http"},
                    "periodSeconds": 5,
                },
                "livenessProbe": {"tcpSocket": {"port": 5432}},
            }],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {"phase": "Running", "startTime": "2024-05-01T10:00:01Z"},
    });
    let bytes = encode(&pod).expect("Pod has a protobuf form");
    assert_eq!(decode(&bytes, "v1", "Pod"), Ok(pod));
}

#[test]
fn group_kinds_and_micro_times_round_trip() {
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "tusk-system"},
        "spec": {"holderIdentity": "a", "renewTime": "2024-05-01T10:00:00.250000Z"},
    });
    let bytes = encode(&lease).expect("Lease has a protobuf form");
    assert_eq!(decode(&bytes, "coordination.k8s.io/v1", "Lease"), Ok(lease));
}

#[test]
fn a_list_and_a_status_have_protobuf_forms() {
    let list = json!({
        "apiVersion": "v1",
        "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "7"},
        "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}],
    });
    assert!(encode(&list).is_some());
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"});
    let bytes = encode(&status).expect("Status has a protobuf form");
    assert_eq!(decode(&bytes, "v1", "Status"), Ok(status));
}

#[test]
fn custom_resources_have_no_protobuf_form() {
    assert!(!serves("postgres.tusk.dev/v1alpha1", "PostgresCluster"));
    assert!(serves("v1", "Namespace"));
    assert!(serves("rbac.authorization.k8s.io/v1", "RoleBinding"));
    let cluster = json!({"apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster"});
    assert_eq!(encode(&cluster), None);
}

#[test]
fn a_body_without_the_prefix_is_refused_naming_it() {
    let error = decode(b"{\"kind\":\"Namespace\"}", "v1", "Namespace").expect_err("refused");
    assert_eq!(
        error,
        ProtobufError::Magic {
            found: b"{\"ki".to_vec()
        }
    );
    assert!(error.to_string().contains("k8s\\x00"), "{error}");
}

#[test]
fn a_broken_envelope_is_refused() {
    let error = decode(b"k8s\0\x0a\xff\xff", "v1", "Namespace").expect_err("refused");
    assert!(matches!(error, ProtobufError::Envelope(_)), "{error:?}");
    assert!(error.to_string().contains("runtime.Unknown"), "{error}");
}

#[test]
fn an_envelope_naming_an_unknown_kind_is_refused() {
    let mut body = encode(&json!({"apiVersion": "v1", "kind": "Namespace"})).expect("encodes");
    let position = body
        .windows(9)
        .position(|w| w == b"Namespace")
        .expect("kind in the envelope");
    body[position..position + 9].copy_from_slice(b"Namezpace");
    let error = decode(&body, "v1", "Namespace").expect_err("refused");
    assert_eq!(
        error,
        ProtobufError::NoMessage {
            api_version: "v1".into(),
            kind: "Namezpace".into()
        }
    );
}
