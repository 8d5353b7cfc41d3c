//! The OpenAPI documents kubectl downloads before it applies.
//!
//! kubectl 1.32 reads `/openapi/v3` to learn whether the server accepts
//! `fieldValidation` for a kind (it then leaves field validation to the
//! server) and falls back to `/openapi/v2`; without either it refuses to
//! apply. The v3 documents list every served kind with its PATCH operation
//! and, for custom kinds, the CRD's schema.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::apiserver::resources::{Registry, Resource};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A definition name such as `dev.tusk.postgres.v1alpha1.PostgresCluster`.
fn definition_name(resource: &Resource, version: &str) -> String {
    let reversed: Vec<&str> = if resource.group.is_empty() {
        vec!["io", "k8s", "api", "core"]
    } else {
        resource.group.split('.').rev().collect()
    };
    format!("{}.{version}.{}", reversed.join("."), resource.kind)
}

fn group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = registry
        .all()
        .iter()
        .flat_map(|r| {
            r.versions
                .iter()
                .filter(|v| v.served)
                .map(|v| (r.group.clone(), v.name.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

pub fn v3_root(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(registry) {
        let document = v3_group_version(registry, &group, version.as_str());
        let mut hasher = DefaultHasher::new();
        document.to_string().hash(&mut hasher);
        let path = gv_path(&group, &version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={:016X}", hasher.finish())}),
        );
    }
    json!({"paths": paths})
}

fn gvk(resource: &Resource, version: &str) -> Value {
    json!([{"group": resource.group, "version": version, "kind": resource.kind}])
}

fn operation(resource: &Resource, version: &str, action: &str, reference: &str) -> Value {
    let mut parameters = vec![
        json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
        json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
        json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    ];
    if action == "patch" {
        parameters.push(json!({"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}));
    }
    json!({
        "operationId": format!("{action}{}", resource.kind),
        "parameters": parameters,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": reference}}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(resource, version)[0],
    })
}

pub fn v3_group_version(registry: &Registry, group: &str, version: &str) -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for resource in registry.all() {
        if resource.group != group || resource.version(version).is_none() {
            continue;
        }
        let definition = definition_name(&resource, version);
        let reference = format!("#/components/schemas/{definition}");
        let base = format!("/{}", gv_path(group, version));
        let item = if resource.namespaced {
            format!(
                "{base}/namespaces/{{namespace}}/{}/{{name}}",
                resource.plural
            )
        } else {
            format!("{base}/{}/{{name}}", resource.plural)
        };
        let collection = item.trim_end_matches("/{name}").to_owned();
        paths.insert(
            item.clone(),
            json!({
                "get": operation(&resource, version, "get", &reference),
                "put": operation(&resource, version, "put", &reference),
                "patch": operation(&resource, version, "patch", &reference),
                "delete": operation(&resource, version, "delete", &reference),
            }),
        );
        paths.insert(
            collection,
            json!({"post": operation(&resource, version, "post", &reference)}),
        );
        let mut schema = resource
            .version(version)
            .and_then(|v| v.schema.as_deref().map(|s| s.schema().clone()))
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        schema["x-kubernetes-group-version-kind"] = gvk(&resource, version);
        schemas.insert(definition, schema);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// A minimal Swagger 2.0 document naming every served kind.
pub fn v2(registry: &Registry) -> Value {
    let mut definitions = Map::new();
    for resource in registry.all() {
        for version in resource.versions.iter().filter(|v| v.served) {
            definitions.insert(
                definition_name(&resource, &version.name),
                json!({
                    "type": "object",
                    "x-kubernetes-group-version-kind": gvk(&resource, &version.name),
                }),
            );
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": {},
        "definitions": definitions,
    })
}

/// The media type of the protobuf v2 document, as the real server labels
/// it (clients ask with `...spec.v2@v1.0+protobuf`, which is not a valid
/// media type to answer with).
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The v2 document in the protobuf encoding client-go insists on: only
/// `swagger` and `info`, no definitions. kubectl then skips client-side
/// schema checks for the kinds it cannot find there and leaves validation
/// to the server, which validates every write (`fieldValidation`).
pub fn v2_protobuf() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        let mut length = bytes.len();
        loop {
            let byte = (length & 0x7f) as u8;
            length >>= 7;
            if length == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
        out.extend_from_slice(bytes);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, b"v1.33.0")].concat();
    [field(1, b"2.0"), field(2, &info)].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_protobuf_encodes_swagger_and_info_fields() {
        let bytes = v2_protobuf();
        assert_eq!(&bytes[..5], &[0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(bytes[5], 0x12);
        assert_eq!(usize::from(bytes[6]), bytes.len() - 7);
    }
}
