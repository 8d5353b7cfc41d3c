//! The parity corpus: manifests for which kube-apiserver, the sandbox's API
//! server and `tusk validate` must give the same verdict.
//!
//! Five sources: the shipped examples and the invalid fixtures, those only
//! the controller's rules (the operator's webhook) refuse included (with
//! their earlier versions, as updates); one mutation per field of the
//! PostgresCluster and PostgresBackup schemas and per bound they declare (wrong types, values
//! past a minimum, maximum, length or property count, unknown enum values
//! and unknown fields), generated from the CRD itself so that a new field
//! is covered the day it is declared; YAML 1.1 scalars that kubectl reads
//! as booleans or numbers; updates that the transition rules judge; and
//! what only the controller's rules judge (parameter values and names per
//! major, resource quantities).

use std::path::Path;

use serde_json::{Value, json};

/// One manifest to judge: `text` is YAML as a user writes it, `old` the
/// object it updates, if any.
pub struct Case {
    pub name: String,
    pub text: String,
    pub old: Option<String>,
}

/// A valid cluster with most of the API's sections set, as the mutations'
/// base.
fn base() -> Value {
    json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "parity"},
        "spec": {
            "instances": 3,
            "postgres": {"version": 15, "parameters": {"shared_buffers": "256MB"}},
            "storage": {"size": "10Gi"},
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            "replication": {"synchronous": {"mode": "any", "number": 1}},
            "failover": {"dataDurability": "required"},
            "backup": {
                "destination": {"url": "s3://bucket/parity", "credentialsSecret": "creds"},
                "retentionDays": 7,
                "schedule": "0 3 * * *"
            },
            "podTemplate": {"labels": {"team": "db"}},
            "deletionPolicy": "Retain"
        }
    })
}

fn yaml(value: &Value) -> String {
    serde_yaml_ng::to_string(value).expect("a JSON value renders as YAML")
}

/// Sets `path` (dot-separated, under the object's root) to `value`,
/// creating the objects on the way.
fn set(mut object: Value, path: &[String], value: Value) -> Value {
    let mut node = &mut object;
    for (i, key) in path.iter().enumerate() {
        if !node.is_object() {
            *node = json!({});
        }
        let map = node.as_object_mut().expect("made an object above");
        if i + 1 == path.len() {
            map.insert(key.clone(), value);
            break;
        }
        node = map.entry(key.clone()).or_insert_with(|| json!({}));
    }
    object
}

/// The fields of Kubernetes' own types the CRD embeds (affinity,
/// tolerations, resource requirements) are Kubernetes' to judge: the
/// mutations stop at their top.
const EMBEDDED: &[&str] = &["affinity", "tolerations", "nodeSelector", "claims"];

/// Mutations of one schema node at `path`.
fn mutations(schema: &Value, path: &[String], out: &mut Vec<(String, Value)>) {
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let at = path.join(".");
    let int = |key: &str| schema.get(key).and_then(Value::as_f64).map(|n| n as i64);
    match ty {
        "integer" | "number" => {
            out.push((format!("{at} as a string"), json!("three")));
            if let Some(min) = int("minimum") {
                out.push((format!("{at} below its minimum"), json!(min - 1)));
            }
            if let Some(max) = int("maximum") {
                out.push((format!("{at} above its maximum"), json!(max + 1)));
            }
        }
        "boolean" => out.push((format!("{at} as a string"), json!("yes"))),
        "string" => {
            out.push((format!("{at} as a number"), json!(5)));
            if schema.get("enum").is_some() {
                out.push((format!("{at} not in its enum"), json!("NotAValue")));
            } else {
                out.push((format!("{at} odd text"), json!("Not Valid !")));
            }
            if let Some(max) = int("maxLength") {
                let long = "a".repeat(usize::try_from(max).unwrap_or(0) + 1);
                out.push((format!("{at} past its maxLength"), json!(long)));
            }
        }
        "array" => out.push((format!("{at} as an object"), json!({"a": 1}))),
        "object" => {
            out.push((format!("{at} as a string"), json!("x")));
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                let mut unknown = path.to_vec();
                unknown.push("notAField".into());
                out.push((
                    format!("{at} with an unknown field"),
                    json!(["unknown", unknown]),
                ));
                for (name, child) in properties {
                    if EMBEDDED.contains(&name.as_str()) {
                        continue;
                    }
                    let mut child_path = path.to_vec();
                    child_path.push(name.clone());
                    mutations(child, &child_path, out);
                }
            } else if let Some(max) = int("maxProperties") {
                let many: serde_json::Map<String, Value> = (0..=max)
                    .map(|i| (format!("example.com/k{i}"), json!("v")))
                    .collect();
                out.push((format!("{at} past its maxProperties"), Value::Object(many)));
            }
        }
        _ => {}
    }
}

/// A valid backup request, the base of its kind's mutations.
fn base_backup() -> Value {
    json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresBackup",
        "metadata": {"name": "parity-now"},
        "spec": {"cluster": "parity", "target": "primary", "type": "full"}
    })
}

/// One case per mutation of each kind's spec schema.
fn generated() -> Vec<Case> {
    let mut cases = mutated("PostgresCluster", base);
    cases.extend(mutated("PostgresBackup", base_backup));
    cases
}

/// One case per mutation of `kind`'s spec schema, applied to `base`.
fn mutated(kind: &str, base: fn() -> Value) -> Vec<Case> {
    let crd = tusk_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .expect("the kind's CRD");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("the schema serialises");
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    let mut found = Vec::new();
    mutations(spec, &["spec".to_owned()], &mut found);
    found
        .into_iter()
        .map(|(name, value)| {
            let object = match value.as_array().map(Vec::as_slice) {
                Some([tag, path]) if tag == "unknown" => {
                    let path: Vec<String> =
                        serde_json::from_value(path.clone()).expect("an unknown field's path");
                    set(base(), &path, json!(1))
                }
                _ => {
                    let path: Vec<String> = name
                        .split(' ')
                        .next()
                        .unwrap_or("")
                        .split('.')
                        .map(String::from)
                        .collect();
                    set(base(), &path, value)
                }
            };
            Case {
                name: format!("{kind} {name}"),
                text: yaml(&object),
                old: None,
            }
        })
        .collect()
}

/// YAML 1.1 scalars: what kubectl reads differs from the text.
fn yaml_1_1() -> Vec<Case> {
    let base_text = yaml(&base());
    let with = |name: &str, from: &str, to: &str| {
        assert!(base_text.contains(from), "{from} in the base");
        Case {
            name: format!("YAML 1.1: {name}"),
            text: base_text.replacen(from, to, 1),
            old: None,
        }
    };
    vec![
        with("parameter off", "shared_buffers: 256MB", "jit: off"),
        with("parameter on", "shared_buffers: 256MB", "jit: on"),
        with(
            "parameter quoted off",
            "shared_buffers: 256MB",
            "jit: \"off\"",
        ),
        with("parameter yes", "shared_buffers: 256MB", "jit: yes"),
        with("parameter No", "shared_buffers: 256MB", "jit: No"),
        with(
            "parameter number",
            "shared_buffers: 256MB",
            "max_connections: 300",
        ),
        with(
            "parameter float",
            "shared_buffers: 256MB",
            "random_page_cost: 1.5",
        ),
        with("label yes", "team: db", "example.com/backup: yes"),
        with("label y", "team: db", "tier: y"),
        with("label quoted yes", "team: db", "example.com/backup: 'yes'"),
        with("instances in octal", "instances: 3", "instances: 03"),
        with("instances in hex", "instances: 3", "instances: 0x3"),
        with("instances as a float", "instances: 3", "instances: 3.0"),
        with("instances quoted", "instances: 3", "instances: \"3\""),
        with("version quoted", "version: 15", "version: \"15\""),
        with("size as a number", "size: 10Gi", "size: 10"),
        with("size in exponent form", "size: 10Gi", "size: 1e3"),
        with("retention off", "retentionDays: 7", "retentionDays: off"),
        with(
            "deletion policy on",
            "deletionPolicy: Retain",
            "deletionPolicy: on",
        ),
    ]
}

/// Updates the transition rules judge, from one earlier version.
fn updates() -> Vec<Case> {
    let old = base();
    let change = |name: &str, path: &[&str], value: Value| {
        let path: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        Case {
            name: format!("update: {name}"),
            text: yaml(&set(base(), &path, value)),
            old: Some(yaml(&old)),
        }
    };
    let mut cases = vec![
        change("storage grows", &["spec", "storage", "size"], json!("20Gi")),
        change(
            "storage shrinks",
            &["spec", "storage", "size"],
            json!("5Gi"),
        ),
        change(
            "storage same in Mi",
            &["spec", "storage", "size"],
            json!("10240Mi"),
        ),
        change(
            "storage class added",
            &["spec", "storage", "storageClassName"],
            json!("fast"),
        ),
        change(
            "version up unapproved",
            &["spec", "postgres", "version"],
            json!(16),
        ),
        change("version down", &["spec", "postgres", "version"], json!(14)),
        change("instances up", &["spec", "instances"], json!(5)),
        change(
            "instances to one with a sync standby",
            &["spec", "instances"],
            json!(1),
        ),
    ];
    let approved = set(
        set(
            base(),
            &["spec".into(), "postgres".into(), "version".into()],
            json!(16),
        ),
        &["spec".into(), "upgrade".into()],
        json!({"approvedVersion": 16}),
    );
    cases.push(Case {
        name: "update: version up approved".into(),
        text: yaml(&approved),
        old: Some(yaml(&old)),
    });
    for (name, changed) in [
        ("backup unchanged", base_backup()),
        (
            "backup type changed",
            set(
                base_backup(),
                &["spec".into(), "type".into()],
                json!("incremental"),
            ),
        ),
    ] {
        cases.push(Case {
            name: format!("update: {name}"),
            text: yaml(&changed),
            old: Some(yaml(&base_backup())),
        });
    }
    cases
}

/// The examples and fixtures shipped in the repository.
fn shipped(repo: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    let read = |path: &Path| std::fs::read_to_string(path).expect("a shipped manifest reads");
    for dir in [
        "deploy/examples",
        "crates/cli/tests/fixtures/invalid",
        "crates/cli/tests/fixtures/operator-refuses",
    ] {
        let mut entries: Vec<_> = std::fs::read_dir(repo.join(dir))
            .expect("a fixture directory")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| {
                let name = p.to_string_lossy();
                name.ends_with(".yaml") && !name.ends_with(".old.yaml")
            })
            .collect();
        entries.sort();
        for path in entries {
            let old_path = path.with_extension("old.yaml");
            cases.push(Case {
                name: path
                    .strip_prefix(repo)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
                text: read(&path),
                old: old_path.exists().then(|| read(&old_path)),
            });
        }
    }
    cases
}

/// What only the controller's rules (and so the operator's webhook)
/// refuse: parameter values under the declared major's rules, parameters
/// of another major, resource quantities; and what they accept.
fn controller_rules() -> Vec<Case> {
    let case = |name: &str, path: &[&str], value: Value| {
        let path: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        Case {
            name: format!("controller: {name}"),
            text: yaml(&set(base(), &path, value)),
            old: None,
        }
    };
    let parameters = ["spec", "postgres", "parameters"];
    let mut cases = vec![
        case(
            "shared_buffers Retain",
            &parameters,
            json!({"shared_buffers": "Retain"}),
        ),
        case(
            "transaction_timeout on 15",
            &parameters,
            json!({"transaction_timeout": "5s"}),
        ),
        case("jit maybe", &parameters, json!({"jit": "maybe"})),
        case("work_mem in GB", &parameters, json!({"work_mem": "1GB"})),
        case(
            "requests.memory -1Gi",
            &["spec", "resources", "requests", "memory"],
            json!("-1Gi"),
        ),
        case(
            "limits.cpu s3://",
            &["spec", "resources", "limits"],
            json!({"cpu": "s3://"}),
        ),
        case(
            "request above its limit",
            &["spec", "resources", "limits"],
            json!({"memory": "512Mi"}),
        ),
        case(
            "limits.cpu 500m",
            &["spec", "resources", "limits"],
            json!({"cpu": "500m"}),
        ),
    ];
    let on_17 = set(
        set(
            base(),
            &["spec".into(), "postgres".into(), "version".into()],
            json!(17),
        ),
        &["spec".into(), "postgres".into(), "parameters".into()],
        json!({"transaction_timeout": "5s"}),
    );
    cases.push(Case {
        name: "controller: transaction_timeout on 17".into(),
        text: yaml(&on_17),
        old: None,
    });
    // An update to a value the controller refuses, and one that leaves
    // the spec alone.
    cases.push(Case {
        name: "controller: update to shared_buffers Retain".into(),
        text: yaml(&set(
            base(),
            &["spec".into(), "postgres".into(), "parameters".into()],
            json!({"shared_buffers": "Retain"}),
        )),
        old: Some(yaml(&base())),
    });
    cases
}

/// Every case, shipped ones first.
pub fn all(repo: &Path) -> Vec<Case> {
    let mut cases = shipped(repo);
    cases.extend(generated());
    cases.extend(yaml_1_1());
    cases.extend(updates());
    cases.extend(controller_rules());
    cases
}
