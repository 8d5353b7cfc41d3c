//! Every admission rule of the v1alpha1 API, with manifests that pass and
//! manifests that fail, including updates checked against the old object
//! (R3, R26, R27, R29). The checks run from the generated CRDs, exactly as
//! the API server runs them.

use serde_json::{Value, json};
use tusk_api::admission::{Violation, validate};

fn cluster(spec: Value) -> Value {
    cluster_named("orders", spec)
}

fn cluster_named(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// A minimal valid spec, with `changes` merged in (JSON merge patch rules).
fn spec_with(changes: Value) -> Value {
    let mut spec = json!({
        "instances": 3,
        "postgres": {"version": 15},
        "storage": {"size": "500Gi"},
    });
    merge(&mut spec, changes);
    spec
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch,
    }
}

enum Expect {
    Valid,
    /// A violation on this field whose message contains this text.
    Invalid(&'static str, &'static str),
}

struct Case {
    name: &'static str,
    old: Option<Value>,
    new: Value,
    expect: Expect,
}

fn create(name: &'static str, changes: Value, expect: Expect) -> Case {
    Case {
        name,
        old: None,
        new: cluster(spec_with(changes)),
        expect,
    }
}

fn update(name: &'static str, old: Value, new: Value, expect: Expect) -> Case {
    Case {
        name,
        old: Some(cluster(spec_with(old))),
        new: cluster(spec_with(new)),
        expect,
    }
}

fn check(cases: Vec<Case>) {
    let crds = tusk_api::crds();
    let mut failures = Vec::new();
    for case in cases {
        let violations = validate(&crds, &case.new, case.old.as_ref());
        let ok = match &case.expect {
            Expect::Valid => violations.is_empty(),
            Expect::Invalid(field, message) => violations
                .iter()
                .any(|v: &Violation| v.field == *field && v.message.contains(message)),
        };
        if !ok {
            let got: Vec<String> = violations.iter().map(ToString::to_string).collect();
            failures.push(format!("{}: got {got:?}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "cases failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn instances_must_be_at_least_one() {
    check(vec![
        create("one instance", json!({"instances": 1}), Expect::Valid),
        create(
            "zero instances",
            json!({"instances": 0}),
            Expect::Invalid("spec.instances", "must be at least 1"),
        ),
        create(
            "negative",
            json!({"instances": -2}),
            Expect::Invalid("spec.instances", "must be at least 1"),
        ),
        create(
            "too many",
            json!({"instances": 65}),
            Expect::Invalid("spec.instances", "maximum of 64"),
        ),
        create(
            "not a number",
            json!({"instances": "three"}),
            Expect::Invalid("spec.instances", "not of type"),
        ),
    ]);
}

#[test]
fn storage_size_is_a_positive_quantity() {
    check(vec![
        create(
            "gibibytes",
            json!({"storage": {"size": "500Gi"}}),
            Expect::Valid,
        ),
        create(
            "decimal",
            json!({"storage": {"size": "1.5T"}}),
            Expect::Valid,
        ),
        create(
            "words",
            json!({"storage": {"size": "lots"}}),
            Expect::Invalid("spec.storage.size", "positive Kubernetes quantity"),
        ),
        create(
            "zero",
            json!({"storage": {"size": "0"}}),
            Expect::Invalid("spec.storage.size", "positive Kubernetes quantity"),
        ),
        create(
            "negative",
            json!({"storage": {"size": "-1Gi"}}),
            Expect::Invalid("spec.storage.size", "positive Kubernetes quantity"),
        ),
        create(
            "missing",
            json!({"storage": {"size": null}}),
            Expect::Invalid("spec.storage.size", "Required value"),
        ),
    ]);
}

#[test]
fn shrinking_storage_is_rejected_and_growing_is_accepted() {
    check(vec![
        update(
            "grow 500Gi to 800Gi",
            json!({"storage": {"size": "500Gi"}}),
            json!({"storage": {"size": "800Gi"}}),
            Expect::Valid,
        ),
        update(
            "1Gi equals 1024Mi",
            json!({"storage": {"size": "1Gi"}}),
            json!({"storage": {"size": "1024Mi"}}),
            Expect::Valid,
        ),
        update("unchanged", json!({}), json!({}), Expect::Valid),
        update(
            "shrink 500Gi to 200Gi",
            json!({"storage": {"size": "500Gi"}}),
            json!({"storage": {"size": "200Gi"}}),
            Expect::Invalid("spec.storage.size", "storage may grow but never shrink"),
        ),
        update(
            "1000Mi is less than 1Gi",
            json!({"storage": {"size": "1Gi"}}),
            json!({"storage": {"size": "1000Mi"}}),
            Expect::Invalid("spec.storage.size", "never shrink"),
        ),
    ]);
}

#[test]
fn storage_class_is_immutable() {
    let fast = json!({"storage": {"storageClassName": "fast"}});
    check(vec![
        update("same class", fast.clone(), fast.clone(), Expect::Valid),
        update(
            "changed class",
            fast.clone(),
            json!({"storage": {"storageClassName": "slow"}}),
            Expect::Invalid("spec.storage.storageClassName", "immutable"),
        ),
        update(
            "class added",
            json!({}),
            fast.clone(),
            Expect::Invalid("spec.storage.storageClassName", "immutable"),
        ),
        update(
            "class removed",
            fast,
            json!({"storage": {"storageClassName": null}}),
            Expect::Invalid("spec.storage.storageClassName", "immutable"),
        ),
    ]);
}

#[test]
fn version_changes_need_approval_and_never_go_down() {
    check(vec![
        create(
            "supported version",
            json!({"postgres": {"version": 18}}),
            Expect::Valid,
        ),
        create(
            "too old",
            json!({"postgres": {"version": 14}}),
            Expect::Invalid("spec.postgres.version", "minimum of 15"),
        ),
        create(
            "too new",
            json!({"postgres": {"version": 19}}),
            Expect::Invalid("spec.postgres.version", "maximum of 18"),
        ),
        update(
            "approved upgrade",
            json!({}),
            json!({"postgres": {"version": 16}, "upgrade": {"approvedVersion": 16}}),
            Expect::Valid,
        ),
        update(
            "unapproved upgrade",
            json!({}),
            json!({"postgres": {"version": 16}}),
            Expect::Invalid("spec.postgres.version", "set spec.upgrade.approvedVersion"),
        ),
        update(
            "approval for another version",
            json!({}),
            json!({"postgres": {"version": 17}, "upgrade": {"approvedVersion": 16}}),
            Expect::Invalid("spec.postgres.version", "set spec.upgrade.approvedVersion"),
        ),
        update(
            "downgrade, even approved",
            json!({"postgres": {"version": 16}}),
            json!({"postgres": {"version": 15}, "upgrade": {"approvedVersion": 15}}),
            Expect::Invalid("spec.postgres.version", "downgrades are not supported"),
        ),
        update(
            "approval without a version change",
            json!({}),
            json!({"upgrade": {"approvedVersion": 16}}),
            Expect::Valid,
        ),
    ]);
}

#[test]
fn required_durability_keeps_synchronous_commit_waiting_for_standbys() {
    let with = |durability: Option<&str>, value: &str| {
        let mut changes =
            json!({"postgres": {"version": 15, "parameters": {"synchronous_commit": value}}});
        if let Some(durability) = durability {
            changes["failover"] = json!({"dataDurability": durability});
        }
        changes
    };
    let field = "spec.postgres.parameters";
    let rule =
        "synchronous_commit must be on or remote_apply while failover.dataDurability is required";
    check(vec![
        create("on", with(Some("required"), "on"), Expect::Valid),
        create(
            "remote_apply",
            with(Some("required"), "remote_apply"),
            Expect::Valid,
        ),
        create(
            "ON as PostgreSQL reads it",
            with(Some("required"), "ON"),
            Expect::Valid,
        ),
        create(
            "local",
            with(Some("required"), "local"),
            Expect::Invalid(field, rule),
        ),
        create(
            "off",
            with(Some("required"), "off"),
            Expect::Invalid(field, rule),
        ),
        create(
            "off as false",
            with(Some("required"), "false"),
            Expect::Invalid(field, rule),
        ),
        create(
            "remote_write",
            with(Some("required"), "remote_write"),
            Expect::Invalid(field, rule),
        ),
        // Required is the default.
        create(
            "local by default",
            with(None, "local"),
            Expect::Invalid(field, rule),
        ),
        create(
            "any case of the name",
            json!({"postgres": {"version": 15, "parameters": {"Synchronous_Commit": "off"}}}),
            Expect::Invalid(field, rule),
        ),
        create(
            "preferred accepts the loss",
            with(Some("preferred"), "off"),
            Expect::Valid,
        ),
    ]);
}

#[test]
fn operator_owned_parameters_cannot_be_set() {
    let params = |p: Value| json!({"postgres": {"version": 15, "parameters": p}});
    check(vec![
        create(
            "user parameters",
            params(json!({"shared_buffers": "1GB", "work_mem": "8MB"})),
            Expect::Valid,
        ),
        create(
            "wal_level in upper case",
            params(json!({"WAL_LEVEL": "minimal"})),
            Expect::Invalid("spec.postgres.parameters", "cannot be set: WAL_LEVEL"),
        ),
        create(
            "port",
            params(json!({"port": "6543"})),
            Expect::Invalid("spec.postgres.parameters", "cannot be set: port"),
        ),
        create(
            "ssl",
            params(json!({"ssl": "off"})),
            Expect::Invalid("spec.postgres.parameters", "cannot be set: ssl"),
        ),
        create(
            "a TLS file",
            params(json!({"ssl_key_file": "/k"})),
            Expect::Invalid("spec.postgres.parameters", "cannot be set: ssl_key_file"),
        ),
        create(
            "a recovery target",
            params(json!({"recovery_target_time": "now"})),
            Expect::Invalid(
                "spec.postgres.parameters",
                "cannot be set: recovery_target_time",
            ),
        ),
        create(
            "replication wiring",
            params(json!({"primary_conninfo": "host=x"})),
            Expect::Invalid(
                "spec.postgres.parameters",
                "cannot be set: primary_conninfo",
            ),
        ),
    ]);
}

#[test]
fn parameters_that_break_durability_or_load_code_cannot_be_set() {
    let params = |p: Value| json!({"postgres": {"version": 15, "parameters": p}});
    let field = "spec.postgres.parameters";
    let mut cases = Vec::new();
    for name in [
        "archive_cleanup_command",
        "recovery_end_command",
        "include",
        "include_dir",
        "Include_If_Exists",
        "dynamic_library_path",
        "fsync",
        "max_wal_senders",
        "unix_socket_group",
        "jit_provider",
        "zero_damaged_pages",
        "log_line_prefix",
    ] {
        cases.push(create(
            name,
            params(json!({ name: "x" })),
            Expect::Invalid(field, "cannot be set"),
        ));
    }
    for (name, value) in [
        ("log_statement", "all"),
        ("log_min_duration_statement", "0"),
        (
            "shared_preload_libraries",
            "pg_stat_statements, auto_explain",
        ),
        ("session_preload_libraries", "auto_explain"),
        ("wal_keep_size", "1GB"),
    ] {
        cases.push(create(name, params(json!({ name: value })), Expect::Valid));
    }
    for (name, value) in [
        ("shared_preload_libraries", "timescaledb"),
        ("shared_preload_libraries", "/tmp/evil.so"),
        ("Local_Preload_Libraries", "pg_stat_statements,x"),
    ] {
        cases.push(create(
            "a library the image may not ship",
            params(json!({ name: value })),
            Expect::Invalid(field, "comma-separated list of libraries from: auth_delay"),
        ));
    }
    check(cases);
}

#[test]
fn parameter_names_must_be_known_to_postgresql() {
    let params = |p: Value| json!({"postgres": {"version": 15, "parameters": p}});
    let field = "spec.postgres.parameters";
    check(vec![
        create(
            "known, in any case",
            params(json!({"DateStyle": "ISO", "work_mem": "8MB", "transaction_timeout": "1min"})),
            Expect::Valid,
        ),
        create(
            "custom prefix.name",
            params(json!({"pg_stat_statements.track": "all", "app.tenant_1": "x"})),
            Expect::Valid,
        ),
        create(
            "a typo",
            params(json!({"shared_buffer": "1GB"})),
            Expect::Invalid(
                field,
                "spec.postgres.parameters.shared_buffer is not a PostgreSQL parameter",
            ),
        ),
        create(
            "not an identifier",
            params(json!({"work mem": "8MB"})),
            Expect::Invalid(field, "spec.postgres.parameters.work mem is not"),
        ),
        create(
            "two dots",
            params(json!({"a.b.c": "1"})),
            Expect::Invalid(field, "spec.postgres.parameters.a.b.c is not"),
        ),
    ]);
}

#[test]
fn parameter_values_must_parse_in_postgresql_conf() {
    let params = |p: Value| json!({"postgres": {"version": 15, "parameters": p}});
    let field = "spec.postgres.parameters";
    let mut cases = vec![create(
        "quotes and inner backslashes",
        params(json!({"search_path": "\"$user\", it's", "app.path": "C:\\dir\\n"})),
        Expect::Valid,
    )];
    for value in ["8MB\nfsync = off", "8MB\r", "8\u{0}MB", "8MB\t"] {
        cases.push(create(
            "a control character",
            params(json!({ "work_mem": value })),
            Expect::Invalid(
                field,
                "spec.postgres.parameters.work_mem: a value must not contain a line break",
            ),
        ));
    }
    cases.push(create(
        "a trailing backslash",
        params(json!({"app.path": "C:\\dir\\"})),
        Expect::Invalid(
            field,
            "spec.postgres.parameters.app.path: a value must not contain",
        ),
    ));
    cases.push(create(
        "a trailing backslash is named",
        params(json!({"app.path": "x\\"})),
        Expect::Invalid(field, "must not end with a backslash"),
    ));
    check(cases);
}

#[test]
fn application_owner_and_database_are_names_of_their_own() {
    let initdb = |i: Value| json!({"bootstrap": {"initdb": i}});
    let owner = "spec.bootstrap.initdb.owner";
    check(vec![
        create(
            "shop",
            initdb(json!({"owner": "shop", "database": "shop"})),
            Expect::Valid,
        ),
        create(
            "the superuser",
            initdb(json!({"owner": "postgres"})),
            Expect::Invalid(owner, "nor be postgres or streaming_replica"),
        ),
        create(
            "the replication role",
            initdb(json!({"owner": "streaming_replica"})),
            Expect::Invalid(owner, "roles the operator manages"),
        ),
        create(
            "a reserved role name",
            initdb(json!({"owner": "pg_monitor"})),
            Expect::Invalid(owner, "must not start with pg_"),
        ),
        create(
            "too long",
            initdb(json!({"owner": "a".repeat(64)})),
            Expect::Invalid(owner, "longer than 63"),
        ),
        create(
            "upper case or NUL",
            initdb(json!({"owner": "Shop\u{0}"})),
            Expect::Invalid(owner, "does not match"),
        ),
        create(
            "a template",
            initdb(json!({"database": "template1"})),
            Expect::Invalid("spec.bootstrap.initdb.database", "template0 or template1"),
        ),
    ]);
}

#[test]
fn bootstrap_names_one_method_and_is_immutable() {
    let recovery = json!({"bootstrap": {"recovery": {"cluster": "orders", "source": {"url": "s3://old/orders"}}}});
    check(vec![
        create(
            "initdb",
            json!({"bootstrap": {"initdb": {"database": "shop", "owner": "shop"}}}),
            Expect::Valid,
        ),
        create("recovery", recovery.clone(), Expect::Valid),
        create(
            "both",
            json!({"bootstrap": {"initdb": {}, "recovery": {"cluster": "old", "source": {"url": "s3://old/orders"}}}}),
            Expect::Invalid("spec.bootstrap", "exactly one"),
        ),
        create(
            "neither",
            json!({"bootstrap": {}}),
            Expect::Invalid("spec.bootstrap", "exactly one"),
        ),
        create(
            "bad database name",
            json!({"bootstrap": {"initdb": {"database": "Shop DB"}}}),
            Expect::Invalid("spec.bootstrap.initdb.database", "does not match"),
        ),
        update(
            "unchanged",
            recovery.clone(),
            recovery.clone(),
            Expect::Valid,
        ),
        update(
            "added later",
            json!({}),
            recovery.clone(),
            Expect::Invalid("spec.bootstrap", "immutable"),
        ),
        update(
            "switched method",
            recovery,
            json!({"bootstrap": {"initdb": {}, "recovery": null}}),
            Expect::Invalid("spec.bootstrap", "immutable"),
        ),
    ]);
}

#[test]
fn recovery_target_time_is_rfc3339() {
    let at = |t: &str| json!({"bootstrap": {"recovery": {"cluster": "o", "source": {"url": "s3://old/o"}, "targetTime": t}}});
    check(vec![
        create("utc", at("2026-05-01T12:00:00Z"), Expect::Valid),
        create(
            "offset and fraction",
            at("2026-05-01T12:00:00.25+02:00"),
            Expect::Valid,
        ),
        create(
            "words",
            at("yesterday"),
            Expect::Invalid("spec.bootstrap.recovery.targetTime", "RFC 3339"),
        ),
        create(
            "date only",
            at("2026-05-01"),
            Expect::Invalid("spec.bootstrap.recovery.targetTime", "RFC 3339"),
        ),
    ]);
}

#[test]
fn a_restore_names_its_source_cluster_and_one_target_at_most() {
    let recovery = |extra: serde_json::Value| {
        let mut recovery = json!({"cluster": "orders", "source": {"url": "s3://old/o"}});
        for (key, value) in extra.as_object().cloned().unwrap_or_default() {
            recovery[key] = value;
        }
        json!({"bootstrap": {"recovery": recovery}})
    };
    check(vec![
        create("latest", recovery(json!({})), Expect::Valid),
        create(
            "an LSN",
            recovery(json!({"targetLsn": "0/3000060"})),
            Expect::Valid,
        ),
        create(
            "a restore point",
            recovery(json!({"targetName": "before-migration", "namespace": "shop"})),
            Expect::Valid,
        ),
        create(
            "no source cluster",
            json!({"bootstrap": {"recovery": {"source": {"url": "s3://old/o"}}}}),
            Expect::Invalid("spec.bootstrap.recovery.cluster", "Required value"),
        ),
        create(
            "two targets",
            recovery(json!({"targetLsn": "0/3000060", "targetName": "p"})),
            Expect::Invalid("spec.bootstrap.recovery", "at most one of targetTime"),
        ),
        create(
            "a malformed LSN",
            recovery(json!({"targetLsn": "3000060"})),
            Expect::Invalid("spec.bootstrap.recovery.targetLsn", "WAL position"),
        ),
    ]);
}

#[test]
fn deletion_policy_is_retain_or_delete() {
    check(vec![
        create("retain", json!({"deletionPolicy": "Retain"}), Expect::Valid),
        create("delete", json!({"deletionPolicy": "Delete"}), Expect::Valid),
        create(
            "unknown policy",
            json!({"deletionPolicy": "Destroy"}),
            Expect::Invalid(
                "spec.deletionPolicy",
                "is not one of \"Retain\" or \"Delete\"",
            ),
        ),
    ]);
}

#[test]
fn synchronous_standbys_must_exist() {
    check(vec![
        create(
            "one of two standbys",
            json!({"replication": {"synchronous": {"mode": "any", "number": 1}}}),
            Expect::Valid,
        ),
        create(
            "first two of two",
            json!({"replication": {"synchronous": {"mode": "first", "number": 2}}}),
            Expect::Valid,
        ),
        create(
            "as many as instances",
            json!({"replication": {"synchronous": {"number": 3}}}),
            Expect::Invalid(
                "spec.replication.synchronous.number",
                "must be lower than instances",
            ),
        ),
        create(
            "unknown mode",
            json!({"replication": {"synchronous": {"mode": "all"}}}),
            Expect::Invalid("spec.replication.synchronous.mode", "is not one of"),
        ),
    ]);
}

#[test]
fn backup_schedule_and_destination_are_checked() {
    let backup = |b: Value| json!({"backup": b});
    let s3 = json!({"url": "s3://backups/orders"});
    check(vec![
        create(
            "daily cron",
            backup(json!({"destination": s3, "schedule": "0 3 * * *", "retentionDays": 14})),
            Expect::Valid,
        ),
        create(
            "shorthand",
            backup(json!({"destination": s3, "schedule": "@daily"})),
            Expect::Valid,
        ),
        create(
            "a directory on a volume",
            backup(json!({"destination": {"url": "file:///pg", "volumeClaim": "pg-backups"}})),
            Expect::Valid,
        ),
        create(
            "a directory without its volume",
            backup(json!({"destination": {"url": "file:///var/backups"}})),
            Expect::Invalid("spec.backup.destination", "needs volumeClaim"),
        ),
        create(
            "a volume for a bucket",
            backup(json!({"destination": {"url": "s3://b", "volumeClaim": "pg-backups"}})),
            Expect::Invalid("spec.backup.destination", "needs a file:///path url"),
        ),
        create(
            "a volume with S3's settings",
            backup(
                json!({"destination": {"url": "file:///pg", "volumeClaim": "pg-backups",
                "endpoint": "https://minio:9000", "credentialsSecret": "keys"}}),
            ),
            Expect::Invalid("spec.backup.destination", "takes no endpoint"),
        ),
        create(
            "an Azure container with its key",
            backup(json!({"destination": {"url": "az://backups/orders",
                "credentialsSecret": "azure-keys"}})),
            Expect::Valid,
        ),
        create(
            "an Azure container without a key",
            backup(json!({"destination": {"url": "az://backups/orders"}})),
            Expect::Invalid("spec.backup.destination", "needs credentialsSecret"),
        ),
        create(
            "a restore from an Azure container without a key",
            json!({"bootstrap": {"recovery": {"cluster": "o", "source": {"url": "az://b"}}}}),
            Expect::Invalid("spec.bootstrap.recovery.source", "needs credentialsSecret"),
        ),
        create(
            "a claim that cannot be named so",
            backup(json!({"destination": {"url": "file:///pg", "volumeClaim": "Backups!"}})),
            Expect::Invalid(
                "spec.backup.destination.volumeClaim",
                "the name of an object",
            ),
        ),
        create(
            "a restore from a directory without its volume",
            json!({"bootstrap": {"recovery": {"cluster": "o", "source": {"url": "file:///pg"}}}}),
            Expect::Invalid("spec.bootstrap.recovery.source", "needs volumeClaim"),
        ),
        create(
            "S3-compatible endpoint",
            backup(json!({"destination": {"url": "s3://b", "endpoint": "http://127.0.0.1:9000"}})),
            Expect::Valid,
        ),
        create(
            "words",
            backup(json!({"destination": s3, "schedule": "daily"})),
            Expect::Invalid("spec.backup.schedule", "five fields"),
        ),
        create(
            "four fields",
            backup(json!({"destination": s3, "schedule": "0 3 * *"})),
            Expect::Invalid("spec.backup.schedule", "five fields"),
        ),
        create(
            "verify schedule",
            backup(json!({"destination": s3, "verify": {"schedule": "weekly"}})),
            Expect::Invalid("spec.backup.verify.schedule", "five fields"),
        ),
        create(
            "http URL",
            backup(json!({"destination": {"url": "http://b/x"}})),
            Expect::Invalid("spec.backup.destination.url", "must be s3://"),
        ),
        create(
            "no bucket",
            backup(json!({"destination": {"url": "s3://"}})),
            Expect::Invalid("spec.backup.destination.url", "must be s3://"),
        ),
        create(
            "endpoint without scheme",
            backup(json!({"destination": {"url": "s3://b", "endpoint": "minio:9000"}})),
            Expect::Invalid("spec.backup.destination.endpoint", "http:// or https://"),
        ),
        create(
            "retention of zero days",
            backup(json!({"destination": s3, "retentionDays": 0})),
            Expect::Invalid("spec.backup.retentionDays", "minimum of 1"),
        ),
        create(
            "Secrets by name",
            backup(
                json!({"destination": {"url": "s3://b", "credentialsSecret": "orders-s3",
                "caSecret": "minio.ca"}}),
            ),
            Expect::Valid,
        ),
        create(
            "a credentials Secret that cannot be named so",
            backup(json!({"destination": {"url": "s3://b", "credentialsSecret": "* * * * *"}})),
            Expect::Invalid(
                "spec.backup.destination.credentialsSecret",
                "the name of an object",
            ),
        ),
        create(
            "a CA Secret that cannot be named so",
            backup(json!({"destination": {"url": "s3://b", "caSecret": "My_CA"}})),
            Expect::Invalid("spec.backup.destination.caSecret", "the name of an object"),
        ),
    ]);
}

#[test]
fn operator_label_and_annotation_keys_are_reserved() {
    let template = |t: Value| json!({"podTemplate": t});
    check(vec![
        create(
            "team label",
            template(json!({"labels": {"team": "payments"}})),
            Expect::Valid,
        ),
        create(
            "role label",
            template(json!({"labels": {"tusk.dev/role": "primary"}})),
            Expect::Invalid("spec.podTemplate.labels", "cannot be set: tusk.dev/role"),
        ),
        create(
            "subdomain annotation",
            template(json!({"annotations": {"backup.tusk.dev/skip": "true"}})),
            Expect::Invalid(
                "spec.podTemplate.annotations",
                "cannot be set: backup.tusk.dev/skip",
            ),
        ),
    ]);
}

#[test]
fn cluster_names_must_fit_in_child_names() {
    let crds = tusk_api::crds();
    let spec = spec_with(json!({}));
    assert!(validate(&crds, &cluster_named("orders-eu-1", spec.clone()), None).is_empty());
    for bad in ["Orders", "1orders", "orders_db", &"o".repeat(51)] {
        let violations = validate(&crds, &cluster_named(bad, spec.clone()), None);
        assert!(
            violations
                .iter()
                .any(|v| v.field == "metadata.name" && v.message.contains("at most 50 characters")),
            "{bad}: {violations:?}"
        );
    }
}

#[test]
fn unknown_fields_are_reported_not_dropped() {
    check(vec![
        create(
            "typo in storage",
            json!({"storage": {"sise": "1Gi"}}),
            Expect::Invalid("spec.storage.sise", "unknown field"),
        ),
        create(
            "field at the wrong level",
            json!({"size": "1Gi"}),
            Expect::Invalid("spec.size", "unknown field"),
        ),
        create(
            "a custom parameter name is fine (a map)",
            json!({"postgres": {"version": 15, "parameters": {"my.custom": "1"}}}),
            Expect::Valid,
        ),
    ]);
}

#[test]
fn a_backup_request_is_immutable() {
    let crds = tusk_api::crds();
    let backup = |cluster: &str, target: &str| {
        json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1",
            "kind": "PostgresBackup",
            "metadata": {"name": "nightly"},
            "spec": {"cluster": cluster, "target": target},
        })
    };
    let old = backup("orders", "preferReplica");
    assert!(validate(&crds, &old, None).is_empty());
    assert!(validate(&crds, &old, Some(&old)).is_empty());
    let changed = validate(&crds, &backup("billing", "preferReplica"), Some(&old));
    assert!(
        changed
            .iter()
            .any(|v| v.field == "spec" && v.message.contains("immutable")),
        "{changed:?}"
    );
    let bad_target = validate(&crds, &backup("orders", "anyone"), None);
    assert!(
        bad_target.iter().any(|v| v.field == "spec.target"),
        "{bad_target:?}"
    );
}

#[test]
fn wrong_api_version_or_kind_is_named() {
    let crds = tusk_api::crds();
    let mut object = cluster(spec_with(json!({})));
    object["apiVersion"] = json!("postgres.tusk.dev/v1");
    let violations = validate(&crds, &object, None);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].field, "apiVersion");
    assert!(violations[0].message.contains("postgres.tusk.dev/v1alpha1"));

    object["apiVersion"] = json!("postgres.tusk.dev/v1alpha1");
    object["kind"] = json!("Postgres");
    let violations = validate(&crds, &object, None);
    assert_eq!(violations[0].field, "kind");
}

#[test]
fn several_violations_are_all_reported() {
    let crds = tusk_api::crds();
    let object = cluster(spec_with(
        json!({"instances": 65, "deletionPolicy": "Destroy"}),
    ));
    let fields: Vec<String> = validate(&crds, &object, None)
        .into_iter()
        .map(|v| v.field)
        .collect();
    assert!(fields.contains(&"spec.instances".to_owned()), "{fields:?}");
    assert!(
        fields.contains(&"spec.deletionPolicy".to_owned()),
        "{fields:?}"
    );
}

/// As kube-apiserver does: the CEL rules of an object the schema refuses
/// are not evaluated, and the refusal says so; unknown fields are refused
/// before anything else is checked.
#[test]
fn rules_wait_for_the_schema_and_unknown_fields_come_first() {
    let crds = tusk_api::crds();
    let object = cluster(spec_with(
        json!({"instances": 0, "deletionPolicy": "Destroy"}),
    ));
    let violations = validate(&crds, &object, None);
    let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["spec.deletionPolicy", ""], "{violations:?}");
    assert_eq!(
        violations[1].message,
        tusk_api::admission::RULES_NOT_CHECKED
    );

    let object = cluster(spec_with(
        json!({"instances": 0, "storage": {"size": "1Gi", "sise": "2Gi"}}),
    ));
    let violations = validate(&crds, &object, None);
    let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["spec.storage.sise"], "{violations:?}");
}

#[test]
fn the_owners_server_certificate_is_named_by_a_secret_name() {
    let own = |name: &str| json!({"certificates": {"serverSecret": name}});
    check(vec![
        create("a name", own("orders-server-cert"), Expect::Valid),
        create("dotted", own("orders.tls"), Expect::Valid),
        create(
            "spaces",
            own("* * * * *"),
            Expect::Invalid("spec.certificates.serverSecret", "the name of an object"),
        ),
        create(
            "upper case",
            own("Orders"),
            Expect::Invalid("spec.certificates.serverSecret", "the name of an object"),
        ),
        create(
            "missing",
            json!({"certificates": {}}),
            Expect::Invalid("spec.certificates.serverSecret", "Required value"),
        ),
    ]);
}
