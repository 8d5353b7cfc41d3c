//! The protobuf bodies kubectl sends for the reviews it creates (`auth
//! can-i`, `auth can-i --list`, `auth whoami`): kubectl's typed clients
//! write built-in kinds as protobuf. Only the fields those reviews carry
//! are read, into the JSON shape the rest of the server reads; the
//! answer goes back as JSON, which kubectl accepts.

use serde_json::{Map, Value, json};

use crate::apiserver::error::ApiError;

/// The envelope's magic prefix (`k8s\0`).
const MAGIC: &[u8] = b"k8s\x00";

/// One field of a message: its number and, for length-delimited fields,
/// its bytes (other wire types are skipped).
type Field<'a> = (u64, Option<&'a [u8]>);

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The fields of one message, in order.
fn fields(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let value = match key & 7 {
            0 => varint(bytes, &mut at).map(|_| None)?,
            1 => {
                at += 8;
                None
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
                let slice = bytes.get(at..at.checked_add(len)?)?;
                at += len;
                Some(slice)
            }
            5 => {
                at += 4;
                None
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    (at == bytes.len()).then_some(out)
}

fn message(bytes: &[u8], number: u64) -> Option<&[u8]> {
    fields(bytes)?
        .into_iter()
        .find(|(n, _)| *n == number)
        .and_then(|(_, v)| v)
}

/// String fields by number, as a JSON object with the given names.
fn strings(bytes: &[u8], names: &[(u64, &str)]) -> Value {
    let mut object = Map::new();
    for (number, value) in fields(bytes).unwrap_or_default() {
        let Some(name) = names.iter().find(|(n, _)| *n == number).map(|(_, s)| *s) else {
            continue;
        };
        if let Some(text) = value.and_then(|v| std::str::from_utf8(v).ok()) {
            object.insert(name.to_owned(), json!(text));
        }
    }
    Value::Object(object)
}

const RESOURCE_ATTRIBUTES: &[(u64, &str)] = &[
    (1, "namespace"),
    (2, "verb"),
    (3, "group"),
    (4, "version"),
    (5, "resource"),
    (6, "subresource"),
    (7, "name"),
];
const NON_RESOURCE_ATTRIBUTES: &[(u64, &str)] = &[(1, "path"), (2, "verb")];

/// The review in a protobuf body, as JSON.
pub fn review_body(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let unsupported = || ApiError::UnsupportedMediaType {
        message: format!(
            "the sandbox reads protobuf bodies of SelfSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview only, not of {kind}"
        ),
    };
    let bad = || ApiError::bad_request(format!("the protobuf body is not a valid {kind}"));
    let envelope = body.strip_prefix(MAGIC).ok_or_else(bad)?;
    let raw = message(envelope, 2).ok_or_else(bad)?;
    let spec = message(raw, 2).unwrap_or_default();
    let spec = match kind {
        "SelfSubjectAccessReview" => {
            let mut out = json!({});
            if let Some(r) = message(spec, 1) {
                out["resourceAttributes"] = strings(r, RESOURCE_ATTRIBUTES);
            }
            if let Some(n) = message(spec, 2) {
                out["nonResourceAttributes"] = strings(n, NON_RESOURCE_ATTRIBUTES);
            }
            out
        }
        "SelfSubjectRulesReview" => strings(spec, &[(1, "namespace")]),
        "SelfSubjectReview" => json!({}),
        _ => return Err(unsupported()),
    };
    let group = if kind == "SelfSubjectReview" {
        "authentication.k8s.io"
    } else {
        "authorization.k8s.io"
    };
    Ok(json!({"apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {}, "spec": spec}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(bytes.len()).expect("short")];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_self_subject_access_review_is_read_from_its_envelope() {
        let attributes = [field(1, b"db"), field(2, b"list"), field(5, b"pods")].concat();
        let spec = field(1, &attributes);
        let raw = [field(1, b""), field(2, &spec)].concat();
        let body = [MAGIC.to_vec(), field(1, b""), field(2, &raw)].concat();
        let review = review_body("SelfSubjectAccessReview", &body).expect("decoded");
        assert_eq!(
            review["spec"]["resourceAttributes"],
            json!({"namespace": "db", "verb": "list", "resource": "pods"})
        );
        assert!(review_body("SelfSubjectAccessReview", b"junk").is_err());
        assert!(review_body("SubjectAccessReview", &body).is_err());
    }
}
