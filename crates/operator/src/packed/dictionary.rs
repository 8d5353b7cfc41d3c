//! Compression of cached entries with a dictionary of what they look like.
//!
//! A cached child is a few hundred bytes of JSON, most of it the same keys
//! and values every cluster's children have (label keys, owner references,
//! port and probe names). Compressed alone, such an object barely shrinks;
//! compressed with zstd against a dictionary that already holds those
//! strings, it shrinks about eightfold (8.3 KB of a cluster's children to
//! about 1.1 KB). The dictionary is the JSON of the children the builders
//! make for an example cluster, trimmed as the caches trim them, plus an
//! example cluster: made once per process, in memory only, so nothing
//! compressed outlives the dictionary it was compressed with.
//!
//! Level 1 keeps the dictionary's tables small (tens of KiB; level 3's are
//! most of a MiB) for a few percent less compression.

use std::sync::OnceLock;

use kube::Resource;
use serde::Serialize;
use serde_json::json;
use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

use crate::builders::{self, Credential};
use crate::children::Trim;
use crate::config::OperatorConfig;

const LEVEL: i32 = 1;

struct Dictionaries {
    encoder: EncoderDictionary<'static>,
    decoder: DecoderDictionary<'static>,
}

fn dictionaries() -> &'static Dictionaries {
    static DICTIONARIES: OnceLock<Dictionaries> = OnceLock::new();
    DICTIONARIES.get_or_init(|| {
        let content = content();
        Dictionaries {
            encoder: EncoderDictionary::copy(&content, LEVEL),
            decoder: DecoderDictionary::copy(&content),
        }
    })
}

/// `json` compressed; `None` when zstd refuses (the entry then stays JSON).
pub fn compress(json: &[u8]) -> Option<Vec<u8>> {
    let mut compressor = Compressor::with_prepared_dictionary(&dictionaries().encoder).ok()?;
    compressor.include_checksum(false).ok()?;
    compressor.include_contentsize(false).ok()?;
    compressor.include_dictid(false).ok()?;
    compressor.compress(json).ok()
}

/// The JSON `compressed` holds, `length` bytes long.
pub fn decompress(compressed: &[u8], length: usize) -> Result<Vec<u8>, String> {
    let mut decompressor = Decompressor::with_prepared_dictionary(&dictionaries().decoder)
        .map_err(|e| e.to_string())?;
    decompressor
        .decompress(compressed, length)
        .map_err(|e| e.to_string())
}

/// The children the builders make for an example cluster and the cluster
/// itself, as JSON, trimmed and named as the caches keep them.
fn content() -> Vec<u8> {
    let mut content = Vec::new();
    let Some(valid) = example() else {
        return content;
    };
    let config = OperatorConfig::default();
    let mut add = |json: Option<Vec<u8>>| content.extend(json.unwrap_or_default());
    for service in [
        builders::rw_service(&valid),
        builders::ro_service(&valid),
        builders::r_service(&valid),
    ] {
        add(cached(service).map(with_service_defaults));
    }
    add(cached(builders::primary_pdb(&valid)));
    add(builders::replicas_pdb(&valid).and_then(cached));
    add(cached(builders::instance_service_account(&valid)));
    add(cached(builders::instance_role(&valid)));
    add(cached(builders::instance_role_binding(&valid)));
    for credential in Credential::ALL {
        add(cached(builders::credentials_secret(&valid, credential, "")));
    }
    let instance = valid.name.instance(1);
    add(cached(builders::instance_pvc(&valid, &instance)));
    let mut pod = builders::instance_pod(&valid, &config, &instance, None);
    pod.status = serde_json::from_value(json!({
        "podIP": "10.0.0.1",
        "conditions": [{"type": "Ready", "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "initContainerStatuses": [{"name": "install-manager", "ready": true, "restartCount": 0,
                                   "image": "", "imageID": "",
                                   "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
        "containerStatuses": [{"name": "postgres", "ready": true, "restartCount": 0,
                               "image": "", "imageID": "", "state": {}}],
    }))
    .ok();
    add(cached(pod));
    add(serde_json::to_vec(&example_status()).ok());
    content
}

/// A Service's JSON with what the API server adds to every Service.
fn with_service_defaults(json: Vec<u8>) -> Vec<u8> {
    let Ok(mut service) = serde_json::from_slice::<serde_json::Value>(&json) else {
        return json;
    };
    if let Some(spec) = service
        .get_mut("spec")
        .and_then(serde_json::Value::as_object_mut)
    {
        let defaults = json!({
            "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
        });
        if let Some(defaults) = defaults.as_object() {
            spec.extend(defaults.clone());
        }
    }
    serde_json::to_vec(&service).unwrap_or(json)
}

/// An example cluster, validated.
fn example() -> Option<crate::validate::ValidatedCluster> {
    let cluster: tusk_api::v1alpha1::PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "example", "namespace": "default",
                     "uid": "00000000-0000-0000-0000-000000000000"},
        "spec": example_spec(),
    }))
    .ok()?;
    crate::validate::validate(&cluster, &OperatorConfig::default()).ok()
}

fn example_spec() -> serde_json::Value {
    json!({
        "instances": 3,
        "postgres": {"version": 17, "parameters": {"shared_buffers": "128MB"}},
        "storage": {"size": "1Gi"},
        "replication": {"dataDurability": "required", "synchronous": {"method": "any", "number": 1}},
    })
}

/// The spec and status of a cached cluster as they are commonly written.
fn example_status() -> serde_json::Value {
    let instance = |name: &str, role: &str| {
        json!({"name": name, "role": role, "ready": true, "timeline": 1, "lsn": "0/3000060",
               "replayLsn": "0/3000060", "lagBytes": 0, "syncState": "quorum"})
    };
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
    };
    json!({
        "spec": example_spec(),
        "status": {
            "phase": "Ready", "observedGeneration": 1, "readyInstances": 3,
            "currentPrimary": "example-1", "targetPrimary": "example-1",
            "latestInstanceSerial": 3, "postgresVersion": 17,
            "lastReconcileTime": "2026-01-01T00:00:00Z",
            "selector": "tusk.dev/cluster=example",
            "instances": [instance("example-1", "primary"), instance("example-2", "replica"),
                          instance("example-3", "replica")],
            "conditions": [condition("Ready", "True", "AllInstancesReady"),
                           condition("Progressing", "False", "Converged"),
                           condition("Degraded", "False", "AsExpected"),
                           condition("PrimaryAvailable", "True", "Serving")],
        }
    })
}

/// `object` trimmed and without the names kept beside the JSON, encoded.
fn cached<K: Resource + Serialize + Trim>(mut object: K) -> Option<Vec<u8>> {
    object.trim();
    let meta = object.meta_mut();
    meta.name = None;
    meta.namespace = None;
    serde_json::to_vec(&object).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An example the validation refuses would leave the dictionary
    /// without children, and compression nearly without effect.
    #[test]
    fn the_dictionary_holds_every_kind_of_cached_child_and_a_cluster() {
        assert!(example().is_some(), "the example cluster validates");
        let content = String::from_utf8(content()).expect("JSON");
        for kind_marker in [
            "\"ipFamilyPolicy\"",
            "\"minAvailable\"",
            "\"rules\"",
            "\"roleRef\"",
            "\"storage\"",
            "\"podIP\"",
            "\"latestInstanceSerial\"",
        ] {
            assert!(
                content.contains(kind_marker),
                "{kind_marker} in the dictionary"
            );
        }
    }

    #[test]
    fn json_comes_back_as_it_was_compressed() {
        let json = br#"{"metadata":{"labels":{"tusk.dev/cluster":"shop"}},"spec":{"ports":[]}}"#;
        let compressed = compress(json).expect("compressed");
        assert!(compressed.len() < json.len(), "{} bytes", compressed.len());
        assert_eq!(
            decompress(&compressed, json.len()).expect("decompressed"),
            json
        );
        assert!(
            decompress(&compressed, json.len() - 1).is_err(),
            "a wrong length is refused"
        );
        assert!(decompress(b"not zstd", json.len()).is_err());
    }
}
