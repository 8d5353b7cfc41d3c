//! Metadata-only answers, as kube-apiserver gives them
//! (`k8s.io/apiserver/pkg/endpoints/handlers/response.go`): a client that
//! sends `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
//! for an object, or `as=PartialObjectMetadataList` for a list, receives
//! each object as its kind, apiVersion and whole metadata, nothing else (a
//! Secret's data never leaves the server).
//!
//! Asking for a list's form on a single object, or a single object's form
//! on a list, is refused with 406 Not Acceptable, as is a group or version
//! other than `meta.k8s.io/v1` or `v1beta1`. A watch sends each event's
//! object as `PartialObjectMetadata` when asked so; asked for the list's
//! form it sends the objects unchanged (kube-apiserver fails to convert
//! each event, logs it and sends the object as it is).

use serde_json::{Value, json};

use crate::apiserver::error::ApiError;

/// The metadata-only form a request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partial {
    Object,
    List,
}

/// The form the client's preferred media type asks for, with its
/// apiVersion; `None` when it asks for the objects themselves (or a
/// Table, see [`crate::apiserver::table`]).
pub fn wanted(accept: &str) -> Result<Option<(Partial, &'static str)>, ApiError> {
    let Some(first) = accept.split(',').next() else {
        return Ok(None);
    };
    let mut target = None;
    let (mut group, mut version) = ("", "");
    for parameter in first.split(';').skip(1).map(str::trim) {
        match parameter.split_once('=') {
            Some(("as", "PartialObjectMetadata")) => target = Some(Partial::Object),
            Some(("as", "PartialObjectMetadataList")) => target = Some(Partial::List),
            Some(("g", g)) => group = g,
            Some(("v", v)) => version = v,
            _ => {}
        }
    }
    let Some(target) = target else {
        return Ok(None);
    };
    let api_version = match (group, version) {
        ("meta.k8s.io", "v1") => "meta.k8s.io/v1",
        ("meta.k8s.io", "v1beta1") => "meta.k8s.io/v1beta1",
        _ => {
            return Err(ApiError::NotAcceptable {
                message: format!(
                    "no PartialObjectMetadataList exists in group version {group}/{version}"
                ),
            });
        }
    };
    Ok(Some((target, api_version)))
}

/// `object` as PartialObjectMetadata.
pub fn object(object: &Value, api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A single object in the form asked for; a list's form is refused.
pub fn single(value: &Value, (partial, api_version): (Partial, &str)) -> Result<Value, ApiError> {
    match partial {
        Partial::Object => Ok(object(value, api_version)),
        Partial::List => Err(ApiError::NotAcceptable {
            message: format!(
                "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
                value
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("object")
            ),
        }),
    }
}

/// A list's items and metadata in the form asked for; a single object's
/// form is refused.
pub fn list(
    items: &[Value],
    metadata: Value,
    kind: &str,
    (partial, api_version): (Partial, &str),
) -> Result<Value, ApiError> {
    match partial {
        Partial::List => Ok(json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": api_version,
            "metadata": metadata,
            "items": items.iter().map(|i| object(i, api_version)).collect::<Vec<_>>(),
        })),
        Partial::Object => Err(ApiError::NotAcceptable {
            message: format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({kind}List)"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_media_type_decides_and_only_meta_k8s_io_is_accepted() {
        let cases = [
            ("application/json", Ok(None)),
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                Ok(Some((Partial::Object, "meta.k8s.io/v1"))),
            ),
            (
                "application/json; as=PartialObjectMetadataList; v=v1beta1; g=meta.k8s.io, application/json",
                Ok(Some((Partial::List, "meta.k8s.io/v1beta1"))),
            ),
            (
                "application/json,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                Ok(None),
            ),
            ("application/json;as=Table;g=meta.k8s.io;v=v1", Ok(None)),
            (
                "application/json;as=PartialObjectMetadata;g=apps;v=v1",
                Err(406),
            ),
            ("application/json;as=PartialObjectMetadata", Err(406)),
        ];
        for (accept, expected) in cases {
            assert_eq!(wanted(accept).map_err(|e| e.code()), expected, "{accept}");
        }
    }

    #[test]
    fn only_metadata_is_kept_and_the_wrong_form_is_refused() {
        let secret = json!({"kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": "s", "labels": {"a": "b"}}, "data": {"password": "c2VjcmV0"}});
        let v1 = (Partial::Object, "meta.k8s.io/v1");
        assert_eq!(
            single(&secret, v1).expect("an object"),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "s", "labels": {"a": "b"}}})
        );
        let as_list = (Partial::List, "meta.k8s.io/v1");
        assert_eq!(single(&secret, as_list).map_err(|e| e.code()), Err(406));
        let listed = list(
            std::slice::from_ref(&secret),
            json!({"resourceVersion": "7"}),
            "Secret",
            as_list,
        )
        .expect("a list");
        assert_eq!(listed["kind"], "PartialObjectMetadataList");
        assert_eq!(listed["metadata"]["resourceVersion"], "7");
        assert_eq!(listed["items"][0], single(&secret, v1).expect("an object"));
        assert_eq!(
            list(&[secret], json!({}), "Secret", v1).map_err(|e| e.code()),
            Err(406)
        );
    }
}
