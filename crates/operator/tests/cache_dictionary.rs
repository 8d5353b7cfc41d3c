//! The compression dictionary of the operator's caches
//! (`src/packed/dictionary.jsonl`, see `tusk_operator::packed`) is what the
//! builders make for an example cluster, trimmed as the caches keep it.
//! This test keeps the checked-in file equal to that; after a change to the
//! builders, `TUSK_WRITE_DICTIONARY=1 cargo test -p tusk-operator --test
//! cache_dictionary` rewrites it.

use std::path::PathBuf;

use kube::Resource;
use serde::Serialize;
use serde_json::json;
use tusk_operator::builders::{self, Credential};
use tusk_operator::children::Trim;
use tusk_operator::config::OperatorConfig;
use tusk_operator::validate::{ValidatedCluster, validate};

fn checked_in() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/packed/dictionary.jsonl")
}

#[test]
fn the_checked_in_dictionary_is_what_the_builders_make() {
    let made = content();
    let path = checked_in();
    if std::env::var_os("TUSK_WRITE_DICTIONARY").is_some() {
        std::fs::write(&path, &made).expect("write the dictionary");
    }
    let file = std::fs::read(&path).expect("the checked-in dictionary");
    assert!(
        file == made,
        "{} differs from what the builders make now ({} against {} bytes): \
         TUSK_WRITE_DICTIONARY=1 cargo test -p tusk-operator --test cache_dictionary",
        path.display(),
        file.len(),
        made.len()
    );
}

/// An example missing a kind of child would leave the caches' entries of
/// that kind nearly uncompressed.
#[test]
fn the_dictionary_holds_every_kind_of_cached_child_and_a_cluster() {
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
    for line in content.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("one JSON object a line");
    }
}

/// The children the builders make for an example cluster and the cluster
/// itself, as JSON, trimmed and named as the caches keep them.
fn content() -> Vec<u8> {
    let mut content = Vec::new();
    let valid = example();
    let config = OperatorConfig::default();
    let mut add = |json: Vec<u8>| {
        content.extend(json);
        content.push(b'\n');
    };
    for service in [
        builders::rw_service(&valid),
        builders::ro_service(&valid),
        builders::r_service(&valid),
    ] {
        add(with_service_defaults(cached(service)));
    }
    add(cached(builders::primary_pdb(&valid)));
    add(cached(
        builders::replicas_pdb(&valid).expect("three instances have a replicas budget"),
    ));
    add(cached(
        builders::network_policy(&valid).expect("the example declares a network policy"),
    ));
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
    .expect("a pod status");
    add(cached(pod));
    add(serde_json::to_vec(&example_status()).expect("JSON"));
    content
}

/// A Service's JSON with what the API server adds to every Service.
fn with_service_defaults(json: Vec<u8>) -> Vec<u8> {
    let mut service: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
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
    serde_json::to_vec(&service).expect("JSON")
}

/// An example cluster, validated.
fn example() -> ValidatedCluster {
    let cluster: tusk_api::v1alpha1::PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "example", "namespace": "default",
                     "uid": "00000000-0000-0000-0000-000000000000"},
        "spec": example_spec(),
    }))
    .expect("an example cluster");
    validate(&cluster, &OperatorConfig::default()).expect("the example cluster validates")
}

fn example_spec() -> serde_json::Value {
    json!({
        "instances": 3,
        "postgres": {"version": 17, "parameters": {"shared_buffers": "128MB"}},
        "storage": {"size": "1Gi"},
        "replication": {"dataDurability": "required", "synchronous": {"method": "any", "number": 1}},
        "networkPolicy": {"clients": [{"podSelector": {"matchLabels": {"app": "example"}}}]},
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
fn cached<K: Resource + Serialize + Trim>(mut object: K) -> Vec<u8> {
    object.trim();
    let meta = object.meta_mut();
    meta.name = None;
    meta.namespace = None;
    serde_json::to_vec(&object).expect("JSON")
}
