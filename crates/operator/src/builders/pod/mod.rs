//! The Pod of one instance.
//!
//! An init container copies the `tusk` binary from the operator image into
//! a shared volume; the PostgreSQL container (any image of the right major)
//! runs it as `tusk instance run`, which supervises PostgreSQL. The pod runs
//! with the restricted security profile (R19): non-root, no privilege
//! escalation, all capabilities dropped, seccomp RuntimeDefault and a
//! read-only root file system with writable volumes where PostgreSQL needs
//! them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinityTerm, PodAntiAffinity, PodSecurityContext,
    PodSpec, Probe, SeccompProfile, SecretKeySelector, SecretVolumeSource, Volume, VolumeMount,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tusk_api::contract::HTTP_PORT;
use tusk_api::instance::{HEALTHZ_PATH, READYZ_PATH};
use tusk_api::labels;

use super::container::{field_env, restricted, value_env};
use super::template::Fingerprint;
use super::{Credential, child_meta};
use crate::config::OperatorConfig;
use crate::names::InstanceName;
use crate::validate::{Bootstrap, ValidatedCluster};
use tusk_api::contract::{KeyNames, KeyService, POSTGRES_TLS_MOUNT, TlsSecret};
use tusk_api::v1alpha1::ObjectStore;

pub use tusk_api::contract::{
    BACKUP_CA_MOUNT_NAME, BACKUP_CREDENTIALS_MOUNT_NAME, CONTROLLER_DIR, DATA_MOUNT, InstanceEnv,
    PGDATA, POSTGRES_PORT, REPOSITORIES_DIR, RESTORE_CA_MOUNT_NAME, RESTORE_CREDENTIALS_MOUNT_NAME,
    RUN_DIR, SECRETS_DIR,
};

/// The pod of `instance`, labelled with `role` (`None` while the operator
/// does not know it yet: such a pod is selected by no role-specific
/// Service).
/// The pod carries the fingerprint of its template (see [`Fingerprint`]).
pub fn instance_pod(
    cluster: &ValidatedCluster,
    config: &OperatorConfig,
    instance: &InstanceName,
    role: Option<&str>,
) -> Pod {
    let mut pod = template_pod(cluster, config, instance);
    let fingerprint = Fingerprint::of(cluster, &pod);
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(labels::POD_TEMPLATE.to_owned(), fingerprint.text());
    if let Some(role) = role {
        pod.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(labels::ROLE.to_owned(), role.to_owned());
    }
    pod
}

/// The fingerprint of the pod `instance` should run now.
pub fn pod_fingerprint(
    cluster: &ValidatedCluster,
    config: &OperatorConfig,
    instance: &InstanceName,
) -> Fingerprint {
    Fingerprint::of(cluster, &template_pod(cluster, config, instance))
}

/// The pod of `instance` without its role label and fingerprint.
pub(super) fn template_pod(
    cluster: &ValidatedCluster,
    config: &OperatorConfig,
    instance: &InstanceName,
) -> Pod {
    let mut metadata = child_meta(cluster, instance.as_str());
    let pod_labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    for (key, value) in &cluster.pod_template.labels {
        pod_labels.insert(key.clone(), value.clone());
    }
    pod_labels.insert(labels::INSTANCE.to_owned(), instance.to_string());
    if !cluster.pod_template.annotations.is_empty() {
        metadata.annotations = Some(cluster.pod_template.annotations.clone());
    }
    let template = &cluster.pod_template;
    Pod {
        metadata,
        spec: Some(PodSpec {
            service_account_name: Some(cluster.name.instance_account()),
            init_containers: Some(vec![install_manager(config)]),
            containers: vec![postgres_container(cluster)],
            volumes: Some(volumes(cluster, instance)),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(config.postgres_uid),
                run_as_group: Some(config.postgres_gid),
                fs_group: Some(config.postgres_gid),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    ..SeccompProfile::default()
                }),
                ..PodSecurityContext::default()
            }),
            termination_grace_period_seconds: Some(config.termination_grace_period_seconds),
            enable_service_links: Some(false),
            node_selector: (!template.node_selector.is_empty())
                .then(|| template.node_selector.clone()),
            tolerations: (!template.tolerations.is_empty()).then(|| template.tolerations.clone()),
            affinity: Some(template.affinity.clone().unwrap_or_else(|| spread(cluster))),
            priority_class_name: template.priority_class_name.clone(),
            topology_spread_constraints: (!template.topology_spread_constraints.is_empty())
                .then(|| template.topology_spread_constraints.clone()),
            image_pull_secrets: (!template.image_pull_secrets.is_empty())
                .then(|| template.image_pull_secrets.clone()),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn install_manager(config: &OperatorConfig) -> Container {
    Container {
        name: "install-manager".to_owned(),
        image: Some(config.operator_image.clone()),
        command: Some(vec![
            "tusk".to_owned(),
            "install-manager".to_owned(),
            format!("{CONTROLLER_DIR}/tusk"),
        ]),
        volume_mounts: Some(vec![mount("controller", CONTROLLER_DIR, false)]),
        security_context: Some(restricted()),
        ..Container::default()
    }
}

/// Where the postgres container finds its volume, scratch directories,
/// the `tusk` binary and every Secret it is given.
fn postgres_mounts(cluster: &ValidatedCluster) -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount("pgdata", DATA_MOUNT, false),
        mount("controller", CONTROLLER_DIR, true),
        mount("run", "/run", false),
        mount("tmp", "/tmp", false),
    ];
    for credential in Credential::ALL {
        mounts.push(mount(
            &format!("secret-{}", credential.mount_name()),
            &format!("{SECRETS_DIR}/{}", credential.mount_name()),
            true,
        ));
    }
    for name in TlsSecret::ALL.iter().filter_map(|s| s.mount_name()) {
        mounts.push(mount(name, &format!("{SECRETS_DIR}/{name}"), true));
    }
    if cluster.server_secret.is_some() {
        mounts.push(mount(
            POSTGRES_TLS_MOUNT,
            &format!("{SECRETS_DIR}/{POSTGRES_TLS_MOUNT}"),
            true,
        ));
    }
    for file in repository_secrets(cluster) {
        mounts.push(mount(
            file.volume,
            &format!("{SECRETS_DIR}/{}", file.mount_name),
            true,
        ));
    }
    for (volume, claim) in repository_claims(cluster) {
        mounts.push(mount(
            &volume,
            &format!("{REPOSITORIES_DIR}/{claim}"),
            false,
        ));
    }
    mounts
}

/// The claims of the `file://` repositories the pod reads or writes (the
/// backup destination's, the restore source's; once each), with the name
/// of the pod volume each becomes.
fn repository_claims(cluster: &ValidatedCluster) -> Vec<(String, &str)> {
    let destination = cluster
        .archive
        .as_ref()
        .and_then(|a| a.volume_claim.as_deref());
    let source = restore_source(cluster).and_then(|s| s.volume_claim.as_deref());
    let mut claims: Vec<&str> = destination.into_iter().chain(source).collect();
    claims.dedup();
    claims
        .into_iter()
        .enumerate()
        .map(|(at, claim)| (format!("repository-{at}"), claim))
        .collect()
}

/// How often the startup probe runs, and how long it lets an instance
/// start (a clone of a large database) before liveness takes over.
const STARTUP_PERIOD_SECONDS: i32 = 1;
const STARTUP_BUDGET_SECONDS: i32 = 3600;

fn postgres_container(cluster: &ValidatedCluster) -> Container {
    // The API is served over HTTPS (`TUSK_API_TLS` in `environment`); the
    // kubelet does not verify a probe's certificate. The operator reads
    // the scheme to know how to reach the pod (`instance_api`).
    let http = |path: &str| HTTPGetAction {
        path: Some(path.to_owned()),
        port: IntOrString::String("http".to_owned()),
        scheme: Some("HTTPS".to_owned()),
        ..HTTPGetAction::default()
    };
    let mounts = postgres_mounts(cluster);
    Container {
        name: "postgres".to_owned(),
        image: Some(cluster.image.clone()),
        command: Some(vec![
            format!("{CONTROLLER_DIR}/tusk"),
            "instance".to_owned(),
            "run".to_owned(),
        ]),
        env: Some(environment(cluster)),
        ports: Some(vec![
            port("postgres", POSTGRES_PORT),
            port("http", HTTP_PORT),
        ]),
        resources: cluster.resources.clone(),
        volume_mounts: Some(mounts),
        security_context: Some(restricted()),
        // Bootstrapping may clone a large database: allow an hour before
        // liveness takes over. Readiness is not probed until this probe
        // passes: a restarted pod joins its Service up to one period after
        // it serves, so the period is a second (a 10 s period made every
        // rollout step and a major upgrade's downtime 10 s longer;
        // docs/benchmarks.md).
        startup_probe: Some(Probe {
            http_get: Some(http(HEALTHZ_PATH)),
            period_seconds: Some(STARTUP_PERIOD_SECONDS),
            failure_threshold: Some(STARTUP_BUDGET_SECONDS / STARTUP_PERIOD_SECONDS),
            ..Probe::default()
        }),
        liveness_probe: Some(Probe {
            http_get: Some(http(HEALTHZ_PATH)),
            period_seconds: Some(10),
            timeout_seconds: Some(5),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        // Readiness is how a hung primary is noticed (failover's clock
        // starts when it turns False): two missed one-second checks, so
        // about two seconds. /readyz answers from a local query.
        readiness_probe: Some(Probe {
            http_get: Some(http(READYZ_PATH)),
            period_seconds: Some(1),
            timeout_seconds: Some(1),
            failure_threshold: Some(2),
            ..Probe::default()
        }),
        ..Container::default()
    }
}

/// A Secret of the backup destination or the restore source that the
/// pod mounts: a CA, or credentials whose key is a file.
struct RepositorySecret<'a> {
    volume: &'static str,
    /// The directory under [`SECRETS_DIR`].
    mount_name: &'static str,
    secret: &'a str,
    /// The files' mode: a CA holds no key and is readable by all; a key
    /// by the pod's group alone.
    mode: i32,
}

/// The Secrets of the repositories the pod mounts: the CA of the
/// destination WAL is archived to and the restore source's, and their
/// credentials when the key is a file (a GCS service account's; S3 keys
/// are environment variables, see [`repository_keys`]).
fn repository_secrets(cluster: &ValidatedCluster) -> Vec<RepositorySecret<'_>> {
    let destination = archive_destination(cluster);
    let source = restore_source(cluster);
    fn ca(store: Option<&ObjectStore>) -> Option<&str> {
        store?.ca_secret.as_deref()
    }
    fn key_file(store: Option<&ObjectStore>) -> Option<&str> {
        let store = store.filter(|s| s.credentials_are_a_file())?;
        store.credentials_secret.as_deref()
    }
    let wanted = [
        ("backup-ca", BACKUP_CA_MOUNT_NAME, ca(destination), 0o444),
        ("restore-ca", RESTORE_CA_MOUNT_NAME, ca(source), 0o444),
        (
            "backup-credentials",
            BACKUP_CREDENTIALS_MOUNT_NAME,
            key_file(destination),
            0o440,
        ),
        (
            "restore-credentials",
            RESTORE_CREDENTIALS_MOUNT_NAME,
            key_file(source),
            0o440,
        ),
    ];
    wanted
        .into_iter()
        .filter_map(|(volume, mount_name, secret, mode)| {
            secret.map(|secret| RepositorySecret {
                volume,
                mount_name,
                secret,
                mode,
            })
        })
        .collect()
}

/// Where WAL is archived (`spec.backup.destination`), when it is.
fn archive_destination(cluster: &ValidatedCluster) -> Option<&ObjectStore> {
    cluster.archive.as_ref()?;
    Some(&cluster.backup.as_ref()?.destination)
}

/// Where a restored cluster reads (`spec.bootstrap.recovery.source`).
fn restore_source(cluster: &ValidatedCluster) -> Option<&ObjectStore> {
    match &cluster.bootstrap {
        Bootstrap::Recovery(recovery) => Some(&recovery.source),
        Bootstrap::Initdb(_) => None,
    }
}

/// The repository's keys, from the Secret the destination names, and the
/// restore source's, from the Secret it names, under the names the pod
/// contract gives them (S3's or Azure's, as the URL says; a GCS key is a
/// file, see [`repository_secrets`]).
fn repository_keys(cluster: &ValidatedCluster) -> Vec<EnvVar> {
    let stores = [
        (archive_destination(cluster), KeyNames::REPOSITORY),
        (restore_source(cluster), KeyNames::SOURCE),
    ];
    stores
        .into_iter()
        .filter_map(|(store, names)| {
            let store = store?;
            let service = KeyService::of_url(&store.url)?;
            let secret = store.credentials_secret.as_deref()?;
            Some(keys_from(secret, service.secret_keys(), names.of(service)))
        })
        .flatten()
        .collect()
}

/// The environment variables `names` from the keys `keys` of the
/// credentials Secret `secret`.
fn keys_from(secret: &str, keys: [&str; 2], names: [&str; 2]) -> [EnvVar; 2] {
    let from_secret = |name: &str, key: &str| EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    [
        from_secret(names[0], keys[0]),
        from_secret(names[1], keys[1]),
    ]
}

fn environment(cluster: &ValidatedCluster) -> Vec<EnvVar> {
    let field = field_env;
    let value = value_env;
    let mut env = vec![
        field(InstanceEnv::POD_NAME, "metadata.name"),
        field(InstanceEnv::POD_NAMESPACE, "metadata.namespace"),
        field(InstanceEnv::POD_IP, "status.podIP"),
        value(InstanceEnv::CLUSTER_NAME, cluster.name.to_string()),
        value(InstanceEnv::PGDATA, PGDATA.to_owned()),
        value(
            InstanceEnv::PG_BIN_DIR,
            tusk_postgres::version::bin_dir(cluster.version),
        ),
        value(InstanceEnv::SECRETS_DIR, SECRETS_DIR.to_owned()),
        value(InstanceEnv::POSTGRES_PORT, POSTGRES_PORT.to_string()),
        value(InstanceEnv::HTTP_PORT, HTTP_PORT.to_string()),
        value(InstanceEnv::RUN_DIR, RUN_DIR.to_owned()),
        // With the probes' HTTPS scheme (see `postgres_container`).
        value(InstanceEnv::API_TLS, "true".to_owned()),
    ];
    env.extend(repository_keys(cluster));
    // Only with a volume to find there: a pod without one keeps the
    // template (and fingerprint) it had before volumes were supported.
    if !repository_claims(cluster).is_empty() {
        env.push(value(
            InstanceEnv::REPOSITORIES_DIR,
            REPOSITORIES_DIR.to_owned(),
        ));
    }
    env
}

/// A volume of Secret `secret`, its files readable as `mode` says.
fn secret_volume(name: &str, secret: &str, mode: i32) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            default_mode: Some(mode),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A writable volume of claim `claim`.
fn claim_volume(name: &str, claim: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_owned(),
            read_only: Some(false),
        }),
        ..Volume::default()
    }
}

fn volumes(cluster: &ValidatedCluster, instance: &InstanceName) -> Vec<Volume> {
    let empty = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mut volumes = vec![
        claim_volume("pgdata", instance.as_str()),
        empty("controller"),
        empty("run"),
        empty("tmp"),
    ];
    for credential in Credential::ALL {
        volumes.push(secret_volume(
            &format!("secret-{}", credential.mount_name()),
            &credential.secret_name(cluster),
            0o440,
        ));
    }
    for secret in TlsSecret::ALL {
        if let Some(name) = secret.mount_name() {
            volumes.push(secret_volume(name, &secret.secret_name(cluster), 0o440));
        }
    }
    // The owner's server certificate (it holds a key: readable by the
    // pod's group alone, as the cluster's own).
    if let Some(secret) = &cluster.server_secret {
        volumes.push(secret_volume(POSTGRES_TLS_MOUNT, secret, 0o440));
    }
    for file in repository_secrets(cluster) {
        volumes.push(secret_volume(file.volume, file.secret, file.mode));
    }
    for (volume, claim) in repository_claims(cluster) {
        volumes.push(claim_volume(&volume, claim));
    }
    volumes
}

/// Prefer instances on different nodes, so one node failure takes at most
/// one instance.
fn spread(cluster: &ValidatedCluster) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        label_selector: Some(LabelSelector {
                            match_labels: Some(BTreeMap::from([(
                                labels::CLUSTER.to_owned(),
                                cluster.name.to_string(),
                            )])),
                            ..LabelSelector::default()
                        }),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

pub(super) fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn port(name: &str, number: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: i32::from(number),
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

#[cfg(test)]
mod tests;
