//! Validate once: a `PostgresCluster` as read from the API becomes a
//! [`ValidatedCluster`] that later steps read instead of the raw spec.
//!
//! Admission (CEL rules in the CRD) already refuses most bad specs; this
//! step re-checks what the controller relies on, because a spec can reach
//! the controller without passing admission (an older CRD, a server without
//! CEL, a hand-edited object in etcd). A problem here is permanent: it names
//! the field and the rule, and waits for the spec to change (R3, R5).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use tusk_api::parameters::is_operator_owned;
use tusk_api::v1alpha1::{
    BackupSpec, DeletionPolicy, FailoverSpec, InitdbSpec, PodTemplate, PostgresCluster,
    PostgresClusterSpec, RecoverySpec,
};
pub use tusk_postgres::synchronous::Synchronous;

use crate::archiving::ArchiveTarget;
use crate::config::OperatorConfig;
use crate::error::SpecError;
use crate::names::ClusterName;

fn spec_error(field: &str, rule: impl Into<String>) -> SpecError {
    SpecError {
        field: field.to_owned(),
        rule: rule.into(),
    }
}

/// How the first instance gets its data.
#[derive(Clone, Debug, PartialEq)]
pub enum Bootstrap {
    Initdb(InitdbSpec),
    Recovery(Box<RecoverySpec>),
}

/// A cluster whose spec the controller can act on.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedCluster {
    pub name: ClusterName,
    pub namespace: String,
    pub generation: Option<i64>,
    /// Controller owner reference for every child.
    pub owner: OwnerReference,
    pub instances: u32,
    pub version: u32,
    pub image: String,
    pub parameters: BTreeMap<String, String>,
    pub storage_size: Quantity,
    pub storage_bytes: u128,
    pub storage_class: Option<String>,
    pub resources: Option<ResourceRequirements>,
    pub synchronous: Option<Synchronous>,
    pub failover: FailoverSpec,
    pub bootstrap: Bootstrap,
    pub backup: Option<BackupSpec>,
    /// Where WAL is archived, when `spec.backup` asks for it and the
    /// destination is one archiving supports.
    pub archive: Option<ArchiveTarget>,
    /// `spec.backup.schedule`, read.
    pub schedule: Option<croner::Cron>,
    /// `spec.backup.verify.schedule` (restore rehearsals), read.
    pub verify_schedule: Option<croner::Cron>,
    pub deletion_policy: DeletionPolicy,
    pub pod_template: PodTemplate,
    /// `spec.networkPolicy`: make the cluster's NetworkPolicy.
    pub network_policy: Option<tusk_api::v1alpha1::NetworkPolicySpec>,
    /// `spec.services`, checked ([`exposure`]).
    pub services: tusk_api::v1alpha1::ServicesSpec,
    /// `spec.serviceAccount.annotations`.
    pub service_account_annotations: BTreeMap<String, String>,
    /// `spec.certificates.serverSecret`: PostgreSQL serves the owner's
    /// certificate.
    pub server_secret: Option<String>,
    pub paused: bool,
    /// `spec.roles`, checked ([`roles`]).
    pub roles: Vec<tusk_api::v1alpha1::RoleSpec>,
    /// A declared major newer than the data's: the upgrade's target (set
    /// by the reconcile's validation, which knows the data's major; the
    /// pods keep running the data's major until the upgrade moves it).
    pub major_upgrade: Option<MajorTarget>,
    /// Declared features this operator version does not act on yet. They
    /// are reported as an `Unsupported` condition, never silently ignored
    /// (R30).
    pub unsupported: Vec<String>,
}

/// The major version and image a major upgrade moves the data to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MajorTarget {
    pub version: u32,
    pub image: String,
}

/// The cluster's name, namespace and the owner reference its children
/// carry.
fn identity(cluster: &PostgresCluster) -> Result<(ClusterName, String, OwnerReference), SpecError> {
    let meta = &cluster.metadata;
    let raw_name = meta.name.as_deref().unwrap_or_default();
    let name = ClusterName::new(raw_name).ok_or_else(|| {
        let rule = "the cluster name must be a DNS label of at most";
        spec_error(
            "metadata.name",
            format!("{rule} {} characters", ClusterName::MAX_LEN),
        )
    })?;
    let namespace = meta
        .namespace
        .clone()
        .ok_or_else(|| spec_error("metadata.namespace", "a cluster is namespaced"))?;
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| spec_error("metadata.uid", "the cluster has no uid yet"))?;
    Ok((name, namespace, owner))
}

/// Validates `cluster` once for the rest of the reconcile.
pub fn validate(
    cluster: &PostgresCluster,
    config: &OperatorConfig,
) -> Result<ValidatedCluster, SpecError> {
    let meta = &cluster.metadata;
    let (name, namespace, owner) = identity(cluster)?;
    let spec = &cluster.spec;

    let instances = u32::try_from(spec.instances)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| spec_error("spec.instances", "must be at least 1"))?;
    let version = tusk_postgres::version::supported_major(i64::from(spec.postgres.version))
        .map_err(|error| spec_error("spec.postgres.version", error.to_string()))?;

    refuse_operator_owned(&spec.postgres.parameters)?;
    refuse_unparseable_parameters(&spec.postgres.parameters, version)?;
    refuse_lossy_commit(spec)?;
    let (storage_size, storage_bytes) = storage(&spec.storage.size)?;
    if let Some(resources) = &spec.resources {
        resources::check(resources)?;
    }
    let services = spec.services.clone().unwrap_or_default();
    exposure::check(&services)?;
    let synchronous = spec
        .synchronous()
        .map_err(|error| spec_error("spec.replication.synchronous.number", error.to_string()))?;
    // The names only matter for a bootstrap still to come: a cluster whose
    // data exists keeps running under the names it was created with
    // (bootstrap is immutable, so refusing them would stop it for good).
    let bootstrapped = cluster
        .status
        .as_ref()
        .is_some_and(|s| s.target_primary.is_some());
    let bootstrap = bootstrap(spec, bootstrapped)?;
    roles::check(spec, &bootstrap)?;
    let unsupported = unsupported(spec);
    let schedule = backup_schedule(spec)?;
    let verify_schedule = verify_schedule(spec)?;

    Ok(ValidatedCluster {
        image: spec
            .postgres
            .image
            .clone()
            .unwrap_or_else(|| config.postgres_image(version)),
        name,
        namespace,
        generation: meta.generation,
        owner,
        instances,
        version,
        parameters: spec.postgres.parameters.clone(),
        storage_size,
        storage_bytes,
        storage_class: spec.storage.storage_class_name.clone(),
        resources: spec.resources.clone(),
        synchronous,
        failover: spec.failover.clone(),
        bootstrap,
        backup: spec.backup.clone(),
        archive: archive_target(spec),
        schedule,
        verify_schedule,
        deletion_policy: spec.deletion_policy,
        pod_template: spec.pod_template.clone().unwrap_or_default(),
        network_policy: spec.network_policy.clone(),
        services,
        service_account_annotations: spec
            .service_account
            .as_ref()
            .map(|s| s.annotations.clone())
            .unwrap_or_default(),
        server_secret: spec.certificates.as_ref().map(|c| c.server_secret.clone()),
        paused: spec.paused,
        roles: spec.roles.clone(),
        major_upgrade: None,
        unsupported,
    })
}

/// Under required durability a commit must wait for the synchronous
/// standbys' flush (the instances run with `on` whatever is declared;
/// a declaration saying otherwise is refused, not silently overridden).
fn refuse_lossy_commit(spec: &PostgresClusterSpec) -> Result<(), SpecError> {
    use tusk_postgres::parameters::{LOSSY_COMMIT_RULE, SYNCHRONOUS_COMMIT, is_durable_commit};
    if spec.failover.data_durability != tusk_api::v1alpha1::DataDurability::Required {
        return Ok(());
    }
    let lossy = spec
        .postgres
        .parameters
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case(SYNCHRONOUS_COMMIT) && !is_durable_commit(v));
    if lossy {
        return Err(spec_error(
            "spec.postgres.parameters.synchronous_commit",
            LOSSY_COMMIT_RULE,
        ));
    }
    Ok(())
}

fn refuse_operator_owned(parameters: &BTreeMap<String, String>) -> Result<(), SpecError> {
    let owned: Vec<&str> = parameters
        .keys()
        .map(String::as_str)
        .filter(|k| is_operator_owned(k))
        .collect();
    if !owned.is_empty() {
        return Err(spec_error(
            "spec.postgres.parameters",
            format!(
                "parameters managed by the operator cannot be set: {}",
                owned.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Names PostgreSQL does not know, values it cannot read back, and values
/// its rules for `major` refuse (type, unit, range, enum values) stop the
/// server at its next start; the first one found is named.
fn refuse_unparseable_parameters(
    parameters: &BTreeMap<String, String>,
    major: u32,
) -> Result<(), SpecError> {
    use tusk_postgres::parameters::{parameter_problem, settings};
    for (name, value) in parameters {
        let typed = || settings::value_rule(major, name, value);
        let problem = parameter_problem(name, value)
            .or_else(|| absent_from_major(name, major))
            .or_else(typed);
        if let Some(rule) = problem {
            return Err(spec_error(
                &format!("spec.postgres.parameters.{name}"),
                rule,
            ));
        }
    }
    Ok(())
}

/// A parameter other majors have and `major` lacks (the union of every
/// major's names admits it; the server of `major` refuses to start).
fn absent_from_major(name: &str, major: u32) -> Option<String> {
    let majors = tusk_postgres::parameters::settings::majors_with(name);
    if majors.is_empty() || majors.contains(&major) {
        return None;
    }
    let listed: Vec<String> = majors.iter().map(u32::to_string).collect();
    Some(format!(
        "is not a parameter of PostgreSQL {major} (it exists in PostgreSQL {})",
        listed.join(", ")
    ))
}

/// The parameters held to the rules of `major` too: the major the data
/// runs while a major upgrade to the declared one is pending (its pods
/// keep the running major's binaries until the upgrade moves the data).
pub fn check_parameters_for(cluster: &PostgresCluster, major: u32) -> Result<(), SpecError> {
    refuse_unparseable_parameters(&cluster.spec.postgres.parameters, major)
}

/// The application owner and database as `bootstrap.initdb` names them:
/// PostgreSQL identifiers the operator can quote, not a role it manages
/// or reserves, not a template database.
fn check_initdb_names(initdb: &InitdbSpec) -> Result<(), SpecError> {
    use tusk_postgres::roles::{REPLICATION, SUPERUSER};
    let identifier = |name: &str| {
        (1..=63).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    const IDENTIFIER_RULE: &str =
        "must be 1 to 63 lower-case letters, digits or '_', not starting with a digit";
    for (field, name) in [
        ("spec.bootstrap.initdb.owner", &initdb.owner),
        ("spec.bootstrap.initdb.database", &initdb.database),
    ] {
        if !identifier(name) {
            return Err(spec_error(field, IDENTIFIER_RULE));
        }
    }
    if initdb.owner.starts_with("pg_") || [SUPERUSER, REPLICATION].contains(&initdb.owner.as_str())
    {
        return Err(spec_error(
            "spec.bootstrap.initdb.owner",
            format!(
                "must not start with pg_ (reserved by PostgreSQL) nor be {SUPERUSER} or \
                 {REPLICATION} (roles the operator manages)"
            ),
        ));
    }
    if ["template0", "template1"].contains(&initdb.database.as_str()) {
        return Err(spec_error(
            "spec.bootstrap.initdb.database",
            "must not be template0 or template1 (PostgreSQL's templates)",
        ));
    }
    Ok(())
}

fn storage(size: &str) -> Result<(Quantity, u128), SpecError> {
    let storage_size = Quantity(size.to_owned());
    let storage_bytes = quantity_bytes(&storage_size)
        .filter(|b| *b > 0)
        .ok_or_else(|| {
            spec_error(
                "spec.storage.size",
                "must be a positive Kubernetes quantity, such as 10Gi or 500Gi",
            )
        })?;
    Ok((storage_size, storage_bytes))
}

/// `spec.backup.schedule`, read.
fn backup_schedule(spec: &PostgresClusterSpec) -> Result<Option<croner::Cron>, SpecError> {
    spec.backup
        .as_ref()
        .and_then(|b| b.schedule.as_deref())
        .map(|s| {
            crate::backups::schedule::parse(s).map_err(|e| spec_error("spec.backup.schedule", e))
        })
        .transpose()
}

/// `spec.backup.verify.schedule`, read.
fn verify_schedule(spec: &PostgresClusterSpec) -> Result<Option<croner::Cron>, SpecError> {
    spec.backup
        .as_ref()
        .and_then(|b| b.verify.as_ref())
        .map(|v| {
            crate::backups::schedule::parse(&v.schedule)
                .map_err(|e| spec_error("spec.backup.verify.schedule", e))
        })
        .transpose()
}

fn bootstrap(spec: &PostgresClusterSpec, bootstrapped: bool) -> Result<Bootstrap, SpecError> {
    let bootstrap = match &spec.bootstrap {
        None => Bootstrap::Initdb(InitdbSpec::default()),
        Some(b) => match (&b.initdb, &b.recovery) {
            (Some(initdb), None) => {
                if !bootstrapped {
                    check_initdb_names(initdb)?;
                }
                Bootstrap::Initdb(initdb.clone())
            }
            (None, Some(recovery)) => {
                let dirs = tusk_api::contract::MountDirs::in_pod();
                if let Some(Err(error)) = spec.restore_source("", &dirs) {
                    return Err(spec_error(
                        "spec.bootstrap.recovery.source",
                        format!(
                            "{error}; restores read S3, GCS and Azure repositories over HTTPS and directories on volumes"
                        ),
                    ));
                }
                Bootstrap::Recovery(Box::new(recovery.clone()))
            }
            _ => {
                return Err(spec_error(
                    "spec.bootstrap",
                    "set exactly one of bootstrap.initdb or bootstrap.recovery",
                ));
            }
        },
    };
    Ok(bootstrap)
}

/// WAL archiving's destination, when the spec archives to a supported one.
fn archive_target(spec: &PostgresClusterSpec) -> Option<ArchiveTarget> {
    spec.wal_archive(&tusk_api::contract::MountDirs::in_pod())?
        .ok()?;
    let destination = &spec.backup.as_ref()?.destination;
    Some(ArchiveTarget {
        url: destination.url.clone(),
        credentials_secret: destination.credentials_secret.clone(),
        volume_claim: destination.volume_claim.clone(),
    })
}

impl ValidatedCluster {
    /// Why the cluster cannot take base backups; `None` when it can.
    pub fn backups_unable(&self) -> Option<String> {
        let Some(backup) = &self.backup else {
            return Some("spec.backup is not set: declare a destination to back up to".to_owned());
        };
        if !backup.wal_archiving {
            return Some(
                "spec.backup.walArchiving is off: a base backup is restorable only with the WAL archived"
                    .to_owned(),
            );
        }
        if self.archive.is_none() {
            return Some(format!(
                "spec.backup.destination `{}` cannot be archived to (the Unsupported condition says why)",
                backup.destination.url
            ));
        }
        None
    }
}

/// Declared features not acted on yet (R30).
fn unsupported(spec: &PostgresClusterSpec) -> Vec<String> {
    let mut unsupported = Vec::new();
    if let Some(backup) = &spec.backup {
        if let Some(Err(error)) = spec.wal_archive(&tusk_api::contract::MountDirs::in_pod()) {
            unsupported.push(format!(
                "spec.backup.destination for WAL archiving ({error})"
            ));
        }
        if !backup.wal_archiving {
            unsupported.push(
                "spec.backup without walArchiving (base backups need the WAL archived)".to_owned(),
            );
        }
    }
    unsupported
}

/// Bytes of a quantity, if it parses and is a whole, non-negative number.
pub fn quantity_bytes(quantity: &Quantity) -> Option<u128> {
    tusk_api::quantity::bytes(quantity)
}

mod exposure;
mod resources;
mod roles;
#[cfg(test)]
pub(crate) mod tests;
