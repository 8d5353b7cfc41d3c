//! The generated CRDs are the public contract (R1-R3, R6): these tests pin
//! what `kubectl` users see (names, printer columns, descriptions, defaults)
//! and what a real API server will accept (CEL rules that compile and stay
//! within the Kubernetes cost budget).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel::{compile_schema, estimate_rule_cost};
use serde_json::Value;
use tusk_api::v1alpha1::{DataDurability, DeletionPolicy, PostgresCluster};

fn crd(kind: &str) -> CustomResourceDefinition {
    tusk_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .expect("the CRD is generated")
}

fn schema(kind: &str) -> Value {
    let crd = crd(kind);
    let version = &crd.spec.versions[0];
    serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("schema serializes")
}

#[test]
fn names_scope_and_subresources_match_the_contract() {
    let cluster = crd("PostgresCluster");
    assert_eq!(cluster.spec.group, "postgres.tusk.dev");
    assert_eq!(cluster.spec.scope, "Namespaced");
    assert_eq!(cluster.spec.names.plural, "postgresclusters");
    assert_eq!(cluster.spec.names.short_names, Some(vec!["pgc".to_owned()]));
    let backup = crd("PostgresBackup");
    assert_eq!(backup.spec.names.short_names, Some(vec!["pgb".to_owned()]));
    for crd in [cluster, backup] {
        assert_eq!(crd.spec.versions.len(), 1);
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.served && version.storage);
        let status = version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref());
        assert!(
            status.is_some(),
            "{} needs the status subresource",
            crd.spec.names.kind
        );
    }
}

/// `kubectl scale pgc` and HorizontalPodAutoscalers drive `spec.instances`
/// through the scale subresource, which reports ready instances and the
/// pods' selector from status.
#[test]
fn cluster_scale_subresource_maps_instances_ready_instances_and_selector() {
    let cluster = crd("PostgresCluster");
    let scale = cluster.spec.versions[0]
        .subresources
        .as_ref()
        .and_then(|s| s.scale.as_ref())
        .expect("PostgresCluster declares the scale subresource");
    assert_eq!(scale.spec_replicas_path, ".spec.instances");
    assert_eq!(scale.status_replicas_path, ".status.readyInstances");
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.selector")
    );
    let status = &schema("PostgresCluster")["properties"]["status"]["properties"];
    assert_eq!(status["selector"]["type"], "string");
    assert_eq!(status["readyInstances"]["type"], "integer");
}

#[test]
fn cluster_printer_columns_show_phase_instances_ready_primary_version_age() {
    let cluster = crd("PostgresCluster");
    let columns: Vec<(String, String)> = cluster.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .expect("printer columns")
        .iter()
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect();
    let expected = [
        ("Phase", ".status.phase"),
        ("Instances", ".spec.instances"),
        ("Ready", ".status.readyInstances"),
        ("Primary", ".status.currentPrimary"),
        ("Version", ".spec.postgres.version"),
        ("Age", ".metadata.creationTimestamp"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(columns, expected);
}

/// `kubectl explain` shows these descriptions: every field must have one.
#[test]
fn every_field_has_a_description() {
    fn walk(node: &Value, path: &str, missing: &mut Vec<String>) {
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                let child_path = format!("{path}.{name}");
                let described = child
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.trim().is_empty());
                if !described {
                    missing.push(child_path.clone());
                }
                walk(child, &child_path, missing);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = node.get(key).filter(|c| c.is_object()) {
                walk(child, &format!("{path}[]"), missing);
            }
        }
    }
    for kind in ["PostgresCluster", "PostgresBackup"] {
        let mut missing = Vec::new();
        let schema = schema(kind);
        for top in ["spec", "status"] {
            walk(&schema["properties"][top], top, &mut missing);
        }
        assert!(
            missing.is_empty(),
            "{kind}: fields without a description: {missing:#?}"
        );
    }
}

/// A real API server refuses a CRD whose rules do not compile or whose
/// estimated cost exceeds its budget; catch that here, not at install time.
#[test]
fn every_cel_rule_compiles_and_passes_the_cost_estimate() {
    fn walk(node: &Value, path: &str, problems: &mut Vec<String>, rules: &mut usize) {
        if let Some(list) = node
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            let compiled = compile_schema(node);
            for result in &compiled.validations {
                if let Err(error) = result {
                    problems.push(format!("{path}: does not compile: {error}"));
                }
            }
            for rule in list
                .iter()
                .filter_map(|r| r.get("rule").and_then(Value::as_str))
            {
                *rules += 1;
                for warning in estimate_rule_cost(rule, &compiled) {
                    problems.push(format!("{path}: {rule}: {}", warning.message));
                }
            }
        }
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                walk(child, &format!("{path}.{name}"), problems, rules);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = node.get(key).filter(|c| c.is_object()) {
                walk(child, &format!("{path}[]"), problems, rules);
            }
        }
    }
    let mut problems = Vec::new();
    let mut rules = 0;
    for kind in ["PostgresCluster", "PostgresBackup"] {
        walk(&schema(kind), kind, &mut problems, &mut rules);
    }
    assert!(
        rules >= 15,
        "expected every declared rule in the CRDs, found {rules}"
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The defaults users get when they omit a field are the ones that lose no
/// data, both in the CRD (applied by the API server) and in the Rust types.
#[test]
fn defaults_are_the_safe_choices() {
    let schema = schema("PostgresCluster");
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(spec["deletionPolicy"]["default"], "Retain");
    assert_eq!(spec["failover"]["default"]["dataDurability"], "required");
    assert_eq!(spec["failover"]["default"]["delaySeconds"], 5);
    assert_eq!(spec["failover"]["default"]["promotionTimeoutSeconds"], 30);

    let minimal: PostgresCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "small"},
        "spec": {"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}
    }))
    .expect("a minimal cluster deserializes");
    assert_eq!(minimal.spec.deletion_policy, DeletionPolicy::Retain);
    assert_eq!(
        minimal.spec.failover.data_durability,
        DataDurability::Required
    );
    assert_eq!(minimal.spec.failover.delay_seconds, 5);
    assert!(!minimal.spec.paused);
}

/// Re-applying a user's manifest must be a no-op (R32): what the types
/// serialize contains no status and no fields the user did not write beyond
/// the documented defaults.
#[test]
fn a_round_trip_keeps_the_users_fields_and_adds_no_status() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/examples/small.yaml"
    ))
    .expect("the example exists");
    let value: Value = serde_yaml_ng::from_str(&text).expect("the example is YAML");
    let typed: PostgresCluster =
        serde_json::from_value(value.clone()).expect("the example deserializes");
    let back = serde_json::to_value(&typed).expect("serializes");
    assert!(back.get("status").is_none_or(Value::is_null));
    assert_eq!(back["spec"]["storage"], value["spec"]["storage"]);
    assert_eq!(back["spec"]["postgres"], value["spec"]["postgres"]);
}

/// kube-apiserver's own estimate (`tusk_api::admission::cost`, held to it
/// by `crates/cli/tests/referee_cel_cost.rs`): no rule or message over its
/// limit, nor the schema's total, with room to spare for the next rule.
#[test]
fn every_crd_is_within_kube_apiservers_cel_cost_budget() {
    use tusk_api::admission::cost::{self, PER_EXPRESSION_LIMIT, SCHEMA_LIMIT};
    for kind in ["PostgresCluster", "PostgresBackup"] {
        let schema = schema(kind);
        let path = "spec.validation.openAPIV3Schema";
        let refused = cost::violations(&schema, path);
        assert!(refused.is_empty(), "{kind}: {refused:#?}");
        let costs = cost::schema_costs(&schema, path);
        // A message is charged once: its cardinality is 1.
        let costliest = costs
            .iter()
            .max_by_key(|e| e.charged())
            .map(|e| (e.field.clone(), e.charged()));
        let total = costs.iter().map(cost::ExpressionCost::charged).sum::<u64>();
        if let Some((field, charged)) = costliest {
            assert!(
                charged <= PER_EXPRESSION_LIMIT / 2,
                "{kind}: {field} costs {charged}, over half the limit of {PER_EXPRESSION_LIMIT}"
            );
        }
        assert!(
            total <= SCHEMA_LIMIT / 4,
            "{kind}: the rules cost {total} together, over a quarter of {SCHEMA_LIMIT}"
        );
    }
}
