//! CEL rules (`x-kubernetes-validations`) of the v1alpha1 API.
//!
//! Each rule is declared once, here, and attached to its field with
//! `x_kube(validation = ...)`. The API server evaluates them at admission;
//! `crate::admission` evaluates the very same CRD schema locally for
//! `tusk validate`. Messages name the rule so that a user who reads only the
//! error knows what to change.
//!
//! kube-apiserver estimates every rule's cost before it accepts the CRD and
//! refuses one whose worst case is over its budget (10,000,000 units a rule,
//! times the times its node can occur, and a message; 100,000,000 for the
//! schema; 1,000,000 is the limit of one evaluation at runtime). The worst
//! case is taken from the schema's bounds, so every map and string a rule
//! walks is bounded (`maxProperties`, `maxLength`), and a message names the
//! first offending key rather than joining them all: map keys have no
//! declared size, so a joined list of them is estimated over the budget.
//! `crate::admission::cost` estimates as kube-apiserver does: the sandbox
//! refuses an over-budget CRD with it, `crates/api/tests/crd_contract.rs`
//! keeps these rules well within budget, and
//! `crates/cli/tests/referee_cel_cost.rs` holds the estimate to a real
//! kube-apiserver's (`referee_install.rs` installs the CRDs there).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::core::{Message, Reason, Rule};

use crate::parameters::{
    CONTROL_CHARACTER_CLASS, CONTROL_CHARACTER_RULE, CUSTOM_PARAMETER_PATTERN,
    DURABLE_SYNCHRONOUS_COMMITS, KNOWN_PARAMETERS, OWNED_PARAMETER_PREFIXES, OWNED_PARAMETERS,
    PRELOAD_PARAMETERS, TRAILING_BACKSLASH_RULE, UNKNOWN_PARAMETER_RULE, preload_list_pattern,
    preload_rule,
};
use tusk_postgres::roles::{REPLICATION, SUPERUSER};

/// `text` as a CEL string literal.
fn cel_string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `names` as a CEL list of string literals.
fn cel_list(names: &[&str]) -> String {
    let items: Vec<String> = names.iter().map(|n| cel_string(n)).collect();
    format!("[{}]", items.join(", "))
}

/// `spec.instances >= 1` (R3).
pub fn at_least_one_instance() -> Rule {
    Rule::new("self >= 1").message("must be at least 1: a cluster needs a primary")
}

/// Storage sizes are quantities, and positive.
pub fn size_is_quantity() -> Rule {
    Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("must be a positive Kubernetes quantity, such as 10Gi or 500Gi")
}

/// Storage may grow, never shrink (R26). Compared as quantities, so `1Gi`
/// and `1024Mi` are equal.
pub fn size_never_shrinks() -> Rule {
    Rule::new(
        "!isQuantity(self) || !isQuantity(oldSelf) || quantity(self).compareTo(quantity(oldSelf)) >= 0",
    )
    .message("storage may grow but never shrink")
    .reason(Reason::FieldValueForbidden)
}

/// `storageClassName` cannot be added, changed or removed after creation.
pub fn storage_class_is_immutable() -> Rule {
    Rule::new(
        "has(self.storageClassName) == has(oldSelf.storageClassName) && \
         (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
    )
    .message("storageClassName is immutable")
    .field_path(".storageClassName")
    .reason(Reason::FieldValueForbidden)
}

/// The PostgreSQL major version never goes down (R27).
pub fn version_never_decreases() -> Rule {
    Rule::new("self >= oldSelf")
        .message("PostgreSQL version downgrades are not supported")
        .reason(Reason::FieldValueForbidden)
}

/// A version change must be approved in the same update (R27, R29).
///
/// Chosen over accept-and-hold: the apply that changes the version fails at
/// once with this message, so the declared spec never describes a version
/// that is not running and not approved.
pub fn version_change_needs_approval() -> Rule {
    Rule::new(
        "self.postgres.version == oldSelf.postgres.version || \
         (has(self.upgrade) && has(self.upgrade.approvedVersion) && \
          self.upgrade.approvedVersion == self.postgres.version)",
    )
    .message(
        "changing the PostgreSQL version is a major upgrade: set spec.upgrade.approvedVersion \
         to the new version in the same update to approve it",
    )
    .field_path(".postgres.version")
    .reason(Reason::FieldValueForbidden)
}

/// The bootstrap method only matters at creation; changing it later would
/// suggest a re-bootstrap that never happens.
pub fn bootstrap_is_immutable() -> Rule {
    Rule::new(
        "has(self.bootstrap) == has(oldSelf.bootstrap) && \
         (!has(self.bootstrap) || self.bootstrap == oldSelf.bootstrap)",
    )
    .message("bootstrap is immutable after creation")
    .field_path(".bootstrap")
    .reason(Reason::FieldValueForbidden)
}

/// Synchronous replication can only wait for standbys that exist.
pub fn synchronous_standbys_fit() -> Rule {
    Rule::new(
        "!has(self.replication) || !has(self.replication.synchronous) || \
         self.replication.synchronous.number < self.instances",
    )
    .message(
        "replication.synchronous.number must be lower than instances: \
         a commit cannot wait for more standbys than the cluster has",
    )
    .field_path(".replication.synchronous.number")
}

/// Under `dataDurability: required`, `synchronous_commit` cannot make a
/// commit's acknowledgement wait for less than a synchronous standby's
/// flush (`local`, `off`, `remote_write`): a failover could lose it.
pub fn synchronous_commit_keeps_durability() -> Rule {
    let durable = DURABLE_SYNCHRONOUS_COMMITS
        .iter()
        .map(|v| format!("'{v}'"))
        .collect::<Vec<_>>()
        .join(", ");
    Rule::new(format!(
        "(has(self.failover) && has(self.failover.dataDurability) && \
          self.failover.dataDurability == 'preferred') || \
         !has(self.postgres.parameters) || \
         self.postgres.parameters.all(k, k.lowerAscii() != 'synchronous_commit' || \
           self.postgres.parameters[k].lowerAscii() in [{durable}])"
    ))
    .message(Message::Message(format!(
        "postgres.parameters.synchronous_commit {}",
        crate::parameters::LOSSY_COMMIT_RULE
    )))
    .field_path(".postgres.parameters")
    .reason(Reason::FieldValueForbidden)
}

/// `bootstrap` names exactly one method.
pub fn exactly_one_bootstrap_method() -> Rule {
    Rule::new("has(self.initdb) != has(self.recovery)")
        .message("set exactly one of bootstrap.initdb or bootstrap.recovery")
}

/// A restore recovers to one target at most.
pub fn at_most_one_recovery_target() -> Rule {
    Rule::new(
        "(has(self.targetTime) ? 1 : 0) + (has(self.targetLsn) ? 1 : 0) + (has(self.targetName) ? 1 : 0) <= 1",
    )
    .message("set at most one of targetTime, targetLsn or targetName")
}

/// WAL positions as PostgreSQL writes them.
pub fn lsn() -> Rule {
    Rule::new("self.matches('^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$')")
        .message("must be a WAL position such as 0/3000060")
}

/// Parameters the operator owns cannot be set by users (docs/api.md,
/// *Parameters the operator owns*).
/// PostgreSQL parameter names are case-insensitive, so the check is too.
pub fn no_operator_owned_parameters() -> Rule {
    let owned = format!(
        "(k.lowerAscii() in [{}] || {})",
        OWNED_PARAMETERS
            .iter()
            .map(|p| format!("'{p}'"))
            .collect::<Vec<_>>()
            .join(", "),
        OWNED_PARAMETER_PREFIXES
            .iter()
            .map(|p| format!("k.lowerAscii().startsWith('{p}')"))
            .collect::<Vec<_>>()
            .join(" || "),
    );
    Rule::new(format!("self.all(k, !{owned})"))
        .message(Message::Expression(format!(
            "'parameters managed by the operator cannot be set: ' + self.filter(k, {owned})[0]"
        )))
        .reason(Reason::FieldValueForbidden)
}

/// Parameter names PostgreSQL knows, or custom `prefix.name` ones: an
/// unknown name in `postgresql.conf` stops the server at its next start.
/// Owned names are left to [`no_operator_owned_parameters`].
pub fn known_parameter_names() -> Rule {
    let known = format!(
        "(k.lowerAscii() in {} || k.lowerAscii() in {} || k.matches({}))",
        cel_list(KNOWN_PARAMETERS),
        cel_list(OWNED_PARAMETERS),
        cel_string(CUSTOM_PARAMETER_PATTERN),
    );
    Rule::new(format!("self.all(k, {known})"))
        .message(Message::Expression(format!(
            "'spec.postgres.parameters.' + self.filter(k, !{known})[0] + {}",
            cel_string(&format!(" {UNKNOWN_PARAMETER_RULE}"))
        )))
        .reason(Reason::FieldValueInvalid)
}

/// Values must render to a line PostgreSQL parses: no control character
/// (a line break would start a new setting), no trailing backslash.
pub fn parameter_values_parse() -> Rule {
    let bad = format!(
        "(self[k].matches({}) || self[k].endsWith('\\\\'))",
        cel_string(CONTROL_CHARACTER_CLASS)
    );
    Rule::new(format!("self.all(k, !{bad})"))
        .message(Message::Expression(format!(
            "'spec.postgres.parameters.' + self.filter(k, {bad})[0] + {}",
            cel_string(&format!(
                ": a value {CONTROL_CHARACTER_RULE}, and {TRAILING_BACKSLASH_RULE}"
            ))
        )))
        .reason(Reason::FieldValueInvalid)
}

/// `*_preload_libraries` list only libraries every image ships.
pub fn preload_libraries_allowed() -> Rule {
    let bad = format!(
        "(k.lowerAscii() in {} && !self[k].matches({}))",
        cel_list(PRELOAD_PARAMETERS),
        cel_string(&preload_list_pattern())
    );
    Rule::new(format!("self.all(k, !{bad})"))
        .message(Message::Expression(format!(
            "'spec.postgres.parameters.' + self.filter(k, {bad})[0] + {}",
            cel_string(&format!(" {}", preload_rule()))
        )))
        .reason(Reason::FieldValueForbidden)
}

/// The application owner is a role of its own: not the superuser or the
/// replication role the operator manages (their passwords would be
/// shared with the application), and not in the `pg_` namespace
/// PostgreSQL reserves.
pub fn app_owner_is_own_role() -> Rule {
    Rule::new(format!(
        "!self.startsWith('pg_') && !(self in {})",
        cel_list(&[SUPERUSER, REPLICATION])
    ))
    .message(Message::Message(format!(
        "must not start with pg_ (reserved by PostgreSQL) nor be {SUPERUSER} or {REPLICATION} \
         (roles the operator manages)"
    )))
    .reason(Reason::FieldValueForbidden)
}

/// The application database is a new one: not a template.
pub fn app_database_is_new() -> Rule {
    Rule::new("!(self in ['template0', 'template1'])")
        .message("must not be template0 or template1 (PostgreSQL's templates)")
        .reason(Reason::FieldValueForbidden)
}

/// Labels and annotations under `tusk.dev/` belong to the operator.
pub fn no_operator_keys(what: &str) -> Rule {
    Rule::new("self.all(k, !k.startsWith('tusk.dev/') && !k.contains('.tusk.dev/'))").message(
        Message::Expression(format!(
            "'{what} under tusk.dev/ belong to the operator and cannot be set: ' + \
             self.filter(k, k.startsWith('tusk.dev/') || k.contains('.tusk.dev/'))[0]"
        )),
    )
}

/// Five-field cron expressions, or the usual shorthands.
pub fn cron_schedule() -> Rule {
    Rule::new(
        "self in ['@hourly', '@daily', '@weekly', '@monthly'] || \
         self.matches('^[0-9*/,-]+( [0-9A-Za-z*/,?-]+){4}$')",
    )
    .message(
        "must be a cron expression with five fields (minute hour day-of-month month day-of-week), \
         or @hourly, @daily, @weekly, @monthly",
    )
}

/// Object store URLs name a supported scheme and a bucket or path.
pub fn object_store_url() -> Rule {
    Rule::new("self.matches('^(s3|gs|az)://[^/]+(/.*)?$') || self.matches('^file:///.+$')")
        .message("must be s3://bucket[/prefix], gs://bucket[/prefix], az://container[/prefix] or file:///path")
}

/// A `file://` repository is a directory on a volume: the claim is named
/// with such a URL, and only with one.
pub fn directory_repository_on_a_volume() -> Rule {
    Rule::new("self.url.startsWith('file://') == has(self.volumeClaim)").message(
        "a file:///path repository needs volumeClaim (the PersistentVolumeClaim holding it), and volumeClaim needs a file:///path url",
    )
}

/// A volume has no endpoint, region, keys or certificate.
pub fn volume_repository_takes_no_service_settings() -> Rule {
    Rule::new(
        "!self.url.startsWith('file://') || !(has(self.endpoint) || has(self.region) || has(self.credentialsSecret) || has(self.caSecret))",
    )
    .message("a file:///path repository takes no endpoint, region, credentialsSecret or caSecret")
}

/// pgBackRest signs in to Azure with a storage account's shared key: an
/// `az://` repository names the Secret holding it.
pub fn azure_repository_names_its_key() -> Rule {
    Rule::new("!self.url.startsWith('az://') || has(self.credentialsSecret)").message(
        "an az://container repository needs credentialsSecret (a Secret with keys AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY)",
    )
}

/// Service endpoints are HTTP(S) URLs.
pub fn http_endpoint() -> Rule {
    Rule::new("self.matches('^https?://[^/]+')")
        .message("must be an http:// or https:// URL, such as https://minio.example:9000")
}

/// Names of objects in the namespace (a DNS-1123 subdomain, as
/// Kubernetes names Secrets).
pub fn object_name() -> Rule {
    Rule::new(
        "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",
    )
    .message(
        "must be the name of an object: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit",
    )
}

/// RFC 3339 timestamps, like Kubernetes' own.
pub fn rfc3339_time() -> Rule {
    Rule::new(
        "self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$')",
    )
    .message("must be an RFC 3339 time, such as 2026-05-01T12:00:00Z")
}

/// A backup request is a record of what happened: it is never edited.
pub fn backup_spec_is_immutable() -> Rule {
    Rule::new("self == oldSelf")
        .message("a PostgresBackup's spec is immutable: create a new PostgresBackup instead")
        .reason(Reason::FieldValueForbidden)
}

/// Cluster names become pod, volume and Service names (`<cluster>-rw`,
/// `<cluster>-<serial>`) and label values, so they must be DNS labels with
/// room for a suffix. The rule reports at `metadata.name`, which the CRD
/// must declare: see [`declare_metadata_name`].
pub fn cluster_name_fits() -> Rule {
    Rule::new(
        "!has(self.metadata.name) || \
         (size(self.metadata.name) <= 50 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))",
    )
    .message(
        "the cluster name must be at most 50 characters of lower-case letters, digits and '-', \
         starting with a letter: it names the cluster's pods, volumes and Services",
    )
    .field_path(".metadata.name")
}

/// Declares `metadata.name` in every version's root schema.
///
/// kube-apiserver accepts a rule's `fieldPath` only if it names a field the
/// schema declares, and the root schema kube-rs derives declares no
/// `metadata`. A root schema may restate `metadata` as an object with a
/// string `name` (and nothing else but `generateName`), so declaring it keeps
/// [`cluster_name_fits`] reporting at `metadata.name`, the field the user
/// has to change, rather than at the object as a whole.
pub fn declare_metadata_name(crd: &mut CustomResourceDefinition) {
    let metadata = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(BTreeMap::from([(
            "name".to_owned(),
            JSONSchemaProps {
                type_: Some("string".into()),
                ..Default::default()
            },
        )])),
        ..Default::default()
    };
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema
                .properties
                .get_or_insert_with(BTreeMap::new)
                .insert("metadata".into(), metadata.clone());
        }
    }
}
