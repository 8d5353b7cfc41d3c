use super::*;

/// A cluster as the API server returns it: named, namespaced, with a uid.
pub(crate) fn cluster(spec: serde_json::Value) -> PostgresCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "0c1d-uid", "generation": 4},
        "spec": spec,
    }))
    .expect("a valid cluster")
}

pub(crate) fn three_instances() -> serde_json::Value {
    serde_json::json!({"instances": 3, "postgres": {"version": 15}, "storage": {"size": "500Gi"}})
}

fn field_of(spec: serde_json::Value) -> String {
    validate(&cluster(spec), &OperatorConfig::default())
        .expect_err("invalid")
        .field
}

#[test]
fn a_valid_spec_is_resolved_with_defaults() {
    let valid = validate(&cluster(three_instances()), &OperatorConfig::default()).expect("valid");
    assert_eq!(valid.name.as_str(), "orders");
    assert_eq!(valid.namespace, "shop");
    assert_eq!(valid.instances, 3);
    assert_eq!(valid.image, "postgres:15");
    assert_eq!(valid.storage_bytes, 500 * 1024 * 1024 * 1024);
    assert_eq!(valid.owner.uid, "0c1d-uid");
    assert_eq!(valid.owner.controller, Some(true));
    assert_eq!(valid.bootstrap, Bootstrap::Initdb(InitdbSpec::default()));
    assert_eq!(valid.deletion_policy, DeletionPolicy::Retain);
    assert!(valid.unsupported.is_empty());
}

#[test]
fn specs_that_bypassed_admission_are_refused_naming_the_field() {
    let mut spec = three_instances();
    spec["instances"] = 0.into();
    assert_eq!(field_of(spec), "spec.instances");

    let mut spec = three_instances();
    spec["storage"]["size"] = "lots".into();
    assert_eq!(field_of(spec), "spec.storage.size");

    let mut spec = three_instances();
    spec["postgres"]["parameters"] = serde_json::json!({"Port": "1"});
    assert_eq!(field_of(spec), "spec.postgres.parameters");

    let mut spec = three_instances();
    spec["replication"] = serde_json::json!({"synchronous": {"number": 3}});
    assert_eq!(field_of(spec), "spec.replication.synchronous.number");

    let mut spec = three_instances();
    spec["postgres"]["version"] = 14.into();
    assert_eq!(field_of(spec), "spec.postgres.version");

    // Required durability (the default) and a commit that does not
    // wait for the synchronous standbys' flush.
    let mut spec = three_instances();
    spec["postgres"]["parameters"] = serde_json::json!({"synchronous_commit": "local"});
    assert_eq!(
        field_of(spec.clone()),
        "spec.postgres.parameters.synchronous_commit"
    );
    spec["failover"] = serde_json::json!({"dataDurability": "preferred"});
    assert!(validate(&cluster(spec), &OperatorConfig::default()).is_ok());
}

#[test]
fn parameters_postgresql_cannot_start_with_are_refused_naming_the_parameter() {
    let refused = |parameters: serde_json::Value| {
        let mut spec = three_instances();
        spec["postgres"]["parameters"] = parameters;
        validate(&cluster(spec), &OperatorConfig::default()).expect_err("invalid")
    };
    let error = refused(serde_json::json!({"shared_buffer": "1GB"}));
    assert_eq!(error.field, "spec.postgres.parameters.shared_buffer");
    assert!(error.rule.contains("not a PostgreSQL parameter"), "{error}");
    let error = refused(serde_json::json!({"work_mem": "8MB\nfsync = off"}));
    assert_eq!(error.field, "spec.postgres.parameters.work_mem");
    assert!(error.rule.contains("line break"), "{error}");
    let error = refused(serde_json::json!({"app.dir": "C:\\"}));
    assert_eq!(error.field, "spec.postgres.parameters.app.dir");
    assert!(error.rule.contains("backslash"), "{error}");
    let error = refused(serde_json::json!({"shared_preload_libraries": "evil"}));
    assert_eq!(
        error.field,
        "spec.postgres.parameters.shared_preload_libraries"
    );
    let error = refused(serde_json::json!({"fsync": "off"}));
    assert_eq!(error.field, "spec.postgres.parameters");
    // Values PostgreSQL's own rules refuse (these once passed).
    for (name, value, rule) in [
        ("shared_buffers", "Retain", "must be an integer"),
        ("max_connections", "", "within 1..262143"),
        ("max_connections", "-1Gi", "must be an integer"),
        ("checkpoint_completion_target", "2", "within 0..1"),
        (
            "log_statement",
            "everything",
            "must be one of: none, ddl, mod, all",
        ),
        ("jit", "maybe", "must be a boolean"),
    ] {
        let error = refused(serde_json::json!({ name: value }));
        assert_eq!(error.field, format!("spec.postgres.parameters.{name}"));
        assert!(error.rule.contains(rule), "{name} = {value:?}: {error}");
    }

    let mut spec = three_instances();
    spec["postgres"]["parameters"] = serde_json::json!({
        "search_path": "\"$user\", it's", "pg_stat_statements.track": "all",
        "shared_preload_libraries": "pg_stat_statements", "log_statement": "all",
        "shared_buffers": "256MB", "work_mem": "4MB", "synchronous_commit": "on",
        "log_min_duration_statement": "250ms", "jit": "off"
    });
    assert!(validate(&cluster(spec), &OperatorConfig::default()).is_ok());
}

#[test]
fn application_names_the_operator_manages_or_reserves_are_refused() {
    let initdb = |initdb: serde_json::Value| {
        let mut spec = three_instances();
        spec["bootstrap"] = serde_json::json!({ "initdb": initdb });
        validate(&cluster(spec), &OperatorConfig::default())
    };
    for owner in [
        "postgres",
        "streaming_replica",
        "pg_monitor",
        "Shop",
        "a\u{0}",
    ] {
        let error = initdb(serde_json::json!({ "owner": owner })).expect_err(owner);
        assert_eq!(error.field, "spec.bootstrap.initdb.owner", "{owner}");
    }
    let long = "a".repeat(64);
    let error = initdb(serde_json::json!({ "owner": long })).expect_err("too long");
    assert!(error.rule.contains("1 to 63"), "{error}");
    let error = initdb(serde_json::json!({ "database": "template0" })).expect_err("template");
    assert_eq!(error.field, "spec.bootstrap.initdb.database");
    assert!(initdb(serde_json::json!({ "owner": "shop", "database": "shop" })).is_ok());
}

#[test]
fn a_cluster_bootstrapped_under_a_name_now_reserved_keeps_running() {
    let mut spec = three_instances();
    spec["bootstrap"] = serde_json::json!({ "initdb": { "owner": "postgres" } });
    let mut existing = cluster(spec);
    assert!(validate(&existing, &OperatorConfig::default()).is_err());
    existing.status = Some(tusk_api::v1alpha1::PostgresClusterStatus {
        target_primary: Some("orders-1".into()),
        ..Default::default()
    });
    assert!(
        validate(&existing, &OperatorConfig::default()).is_ok(),
        "bootstrap is immutable: its names cannot be fixed in place"
    );
}

#[test]
fn declared_features_not_yet_acted_on_are_reported_as_unsupported() {
    let mut spec = three_instances();
    spec["backup"] = serde_json::json!({"destination": {"url": "s3://b/o"}});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(valid.unsupported.is_empty(), "WAL archiving to S3 works");
    assert_eq!(valid.archive.map(|a| a.url).as_deref(), Some("s3://b/o"));

    spec["backup"] = serde_json::json!({"destination": {"url": "gs://b/o"}});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(valid.unsupported.is_empty(), "WAL archiving to GCS works");
    assert_eq!(valid.archive.map(|a| a.url).as_deref(), Some("gs://b/o"));

    spec["backup"] =
        serde_json::json!({"destination": {"url": "az://b/o", "credentialsSecret": "azure"}});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(valid.unsupported.is_empty(), "WAL archiving to Azure works");
    assert_eq!(valid.archive.map(|a| a.url).as_deref(), Some("az://b/o"));

    // Azure without a key: nothing to sign in with.
    spec["backup"] = serde_json::json!({
        "destination": {"url": "az://b/o"},
        "schedule": "@daily",
        "verify": {"schedule": "@weekly"}
    });
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert_eq!(valid.archive, None);
    let said = valid.unsupported.join("; ");
    assert!(said.contains("spec.backup.destination"), "{said}");
    assert!(
        said.contains("credentialsSecret") && said.contains("AZURE_STORAGE_KEY"),
        "{said}"
    );
    assert!(!said.contains("schedule"), "schedules are taken: {said}");
    assert!(!said.contains("verify"), "rehearsals are taken: {said}");
    assert!(
        valid
            .backups_unable()
            .is_some_and(|why| why.contains("az://b/o"))
    );

    spec["backup"] = serde_json::json!({"destination": {"url": "s3://b"}, "walArchiving": false});
    let valid = validate(&cluster(spec), &OperatorConfig::default()).expect("valid");
    assert_eq!(valid.archive, None);
    assert_eq!(valid.unsupported.len(), 1);
    assert!(valid.unsupported[0].contains("base backups"));
    assert!(
        valid
            .backups_unable()
            .is_some_and(|why| why.contains("walArchiving"))
    );
}

#[test]
fn a_restore_source_restores_cannot_read_is_refused_naming_the_field() {
    let mut spec = three_instances();
    spec["bootstrap"] = serde_json::json!({"recovery": {
        "cluster": "old", "source": {"url": "s3://b/o"}, "targetTime": "2026-12-04T18:00:00Z"}});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(matches!(valid.bootstrap, Bootstrap::Recovery(_)));
    assert!(valid.unsupported.is_empty(), "{:?}", valid.unsupported);
    spec["bootstrap"]["recovery"]["source"] = serde_json::json!({"url": "gs://b/o"});
    validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("a GCS source is read");
    spec["bootstrap"]["recovery"]["source"] =
        serde_json::json!({"url": "az://b/o", "credentialsSecret": "azure"});
    validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("an Azure source is read");
    spec["bootstrap"]["recovery"]["source"] = serde_json::json!({"url": "az://b/o"});
    let error = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect_err("az://");
    let text = error.to_string();
    assert!(
        text.contains("spec.bootstrap.recovery.source")
            && text.contains("az://b/o")
            && text.contains("AZURE_STORAGE_ACCOUNT"),
        "{text}"
    );
    // A directory is read from the volume it names; without one there is
    // nothing to read it from.
    spec["bootstrap"]["recovery"]["source"] =
        serde_json::json!({"url": "file:///pg", "volumeClaim": "pg-backups"});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(matches!(valid.bootstrap, Bootstrap::Recovery(_)));
    spec["bootstrap"]["recovery"]["source"] = serde_json::json!({"url": "file:///pg"});
    let error = validate(&cluster(spec), &OperatorConfig::default()).expect_err("no volume");
    let text = error.to_string();
    assert!(
        text.contains("spec.bootstrap.recovery.source") && text.contains("volumeClaim"),
        "{text}"
    );
}

#[test]
fn a_directory_on_a_volume_is_archived_and_backed_up_to() {
    let mut spec = three_instances();
    spec["backup"] = serde_json::json!({"destination": {
        "url": "file:///pg", "volumeClaim": "pg-backups"}});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(valid.unsupported.is_empty(), "{:?}", valid.unsupported);
    assert_eq!(
        valid
            .archive
            .as_ref()
            .and_then(|a| a.volume_claim.as_deref()),
        Some("pg-backups")
    );
    assert_eq!(valid.backups_unable(), None);

    // Admission refuses a directory without its volume; one that got in
    // anyway (an older CRD) is reported, not archived to.
    spec["backup"] = serde_json::json!({"destination": {"url": "file:///pg"}});
    let valid = validate(&cluster(spec), &OperatorConfig::default()).expect("valid");
    assert_eq!(valid.archive, None);
    let said = valid.unsupported.join("; ");
    assert!(said.contains("volumeClaim"), "{said}");
}

#[test]
fn a_schedule_cron_cannot_read_is_refused_naming_the_field() {
    let mut spec = three_instances();
    spec["backup"] =
        serde_json::json!({"destination": {"url": "s3://b/o"}, "schedule": "0 3 * * *"});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(valid.schedule.is_some() && valid.backups_unable().is_none());
    spec["backup"]["verify"] = serde_json::json!({"schedule": "@weekly"});
    let valid = validate(&cluster(spec.clone()), &OperatorConfig::default()).expect("valid");
    assert!(valid.verify_schedule.is_some());
    let mut bad_verify = spec.clone();
    bad_verify["backup"]["verify"]["schedule"] = serde_json::json!("0 25 * * *");
    let error = validate(&cluster(bad_verify), &OperatorConfig::default()).expect_err("hour 25");
    let text = error.to_string();
    assert!(
        text.contains("spec.backup.verify.schedule") && text.contains("0 25"),
        "{text}"
    );
    spec["backup"]["schedule"] = serde_json::json!("61 3 * * *");
    let error = validate(&cluster(spec), &OperatorConfig::default()).expect_err("minute 61");
    let text = error.to_string();
    assert!(
        text.contains("spec.backup.schedule") && text.contains("61 3"),
        "{text}"
    );
}

#[test]
fn quantities_compare_by_bytes() {
    assert_eq!(
        quantity_bytes(&Quantity("1Gi".into())),
        quantity_bytes(&Quantity("1024Mi".into()))
    );
    assert_eq!(quantity_bytes(&Quantity("1G".into())), Some(1_000_000_000));
    assert_eq!(quantity_bytes(&Quantity("garbage".into())), None);
}

#[test]
fn a_parameter_of_a_later_major_is_refused_on_an_earlier_one() {
    let with = |version: i64| {
        let mut spec = three_instances();
        spec["postgres"]["version"] = version.into();
        spec["postgres"]["parameters"] = serde_json::json!({"transaction_timeout": "5s"});
        validate(&cluster(spec), &OperatorConfig::default())
    };
    let error = with(15).expect_err("PostgreSQL 15 has no transaction_timeout");
    assert_eq!(error.field, "spec.postgres.parameters.transaction_timeout");
    assert!(error.rule.contains("PostgreSQL 15"), "{error}");
    assert!(error.rule.contains("17, 18"), "{error}");
    assert!(with(17).is_ok());
}

#[test]
fn a_pending_major_upgrade_holds_parameters_to_the_running_major_too() {
    let mut spec = three_instances();
    spec["postgres"]["version"] = 17.into();
    spec["postgres"]["parameters"] = serde_json::json!({"transaction_timeout": "5s"});
    let upgrading = cluster(spec);
    assert!(validate(&upgrading, &OperatorConfig::default()).is_ok());
    let error = check_parameters_for(&upgrading, 16).expect_err("16 runs until the upgrade");
    assert_eq!(error.field, "spec.postgres.parameters.transaction_timeout");
}

#[test]
fn resource_quantities_are_held_to_kubernetes_rules() {
    for (resources, field) in [
        (
            serde_json::json!({"requests": {"memory": "-1Gi"}}),
            "spec.resources.requests.memory",
        ),
        (
            serde_json::json!({"limits": {"cpu": "s3://"}}),
            "spec.resources.limits.cpu",
        ),
    ] {
        let mut spec = three_instances();
        spec["resources"] = resources;
        assert_eq!(field_of(spec), field);
    }
}
