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
use crate::validate::ValidatedCluster;

pub use tusk_api::contract::{
    BACKUP_CA_MOUNT_NAME, CONTROLLER_DIR, DATA_MOUNT, InstanceEnv, PGDATA, POSTGRES_PORT, RUN_DIR,
    S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, SECRETS_DIR,
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
fn template_pod(
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

fn postgres_container(cluster: &ValidatedCluster) -> Container {
    let http = |path: &str| HTTPGetAction {
        path: Some(path.to_owned()),
        port: IntOrString::String("http".to_owned()),
        ..HTTPGetAction::default()
    };
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
    if backup_ca_secret(cluster).is_some() {
        mounts.push(mount(
            BACKUP_CA_VOLUME,
            &format!("{SECRETS_DIR}/{BACKUP_CA_MOUNT_NAME}"),
            true,
        ));
    }
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
        // liveness takes over.
        startup_probe: Some(Probe {
            http_get: Some(http(HEALTHZ_PATH)),
            period_seconds: Some(10),
            failure_threshold: Some(360),
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

/// The volume of the backup destination's CA Secret.
const BACKUP_CA_VOLUME: &str = "backup-ca";

/// The CA Secret of the destination WAL is archived to, if one is named.
fn backup_ca_secret(cluster: &ValidatedCluster) -> Option<&str> {
    cluster.archive.as_ref()?;
    cluster.backup.as_ref()?.destination.ca_secret.as_deref()
}

/// The repository's keys, from the Secret the destination names, under
/// the names pgBackRest reads (the pod contract's).
fn repository_keys(cluster: &ValidatedCluster) -> Vec<EnvVar> {
    let Some(secret) = cluster
        .archive
        .as_ref()
        .and_then(|a| a.credentials_secret.as_deref())
    else {
        return Vec::new();
    };
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
    vec![
        from_secret(InstanceEnv::REPOSITORY_KEY, S3_ACCESS_KEY_ID),
        from_secret(InstanceEnv::REPOSITORY_KEY_SECRET, S3_SECRET_ACCESS_KEY),
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
    ];
    env.extend(repository_keys(cluster));
    env
}

fn volumes(cluster: &ValidatedCluster, instance: &InstanceName) -> Vec<Volume> {
    let empty = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    let mut volumes = vec![
        Volume {
            name: "pgdata".to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: instance.to_string(),
                read_only: Some(false),
            }),
            ..Volume::default()
        },
        empty("controller"),
        empty("run"),
        empty("tmp"),
    ];
    for credential in Credential::ALL {
        volumes.push(Volume {
            name: format!("secret-{}", credential.mount_name()),
            secret: Some(SecretVolumeSource {
                secret_name: Some(credential.secret_name(cluster)),
                default_mode: Some(0o440),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    if let Some(secret) = backup_ca_secret(cluster) {
        volumes.push(Volume {
            name: BACKUP_CA_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                default_mode: Some(0o444),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
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

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
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
mod tests {
    use super::*;
    use crate::builders::validated;

    fn pod(spec: serde_json::Value, role: Option<&str>) -> Pod {
        let cluster = validated(spec);
        instance_pod(
            &cluster,
            &OperatorConfig::default(),
            &cluster.name.instance(1),
            role,
        )
    }

    fn small() -> serde_json::Value {
        serde_json::json!({"instances": 1, "postgres": {"version": 16}, "storage": {"size": "1Gi"}})
    }

    #[test]
    fn the_pod_runs_the_instance_manager_in_the_postgres_image() {
        let pod = pod(small(), Some("primary"));
        let spec = pod.spec.expect("spec");
        let init = &spec.init_containers.expect("init")[0];
        assert_eq!(
            init.image.as_deref(),
            Some(crate::install::operator_image().as_str())
        );
        let postgres = &spec.containers[0];
        assert_eq!(postgres.image.as_deref(), Some("postgres:16"));
        assert_eq!(
            postgres.command.as_ref().expect("command")[0],
            "/controller/tusk"
        );
        let env: BTreeMap<String, EnvVar> = postgres
            .env
            .clone()
            .expect("env")
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
        assert_eq!(
            env["PG_BIN_DIR"].value.as_deref(),
            Some("/usr/lib/postgresql/16/bin")
        );
        assert_eq!(env["CLUSTER_NAME"].value.as_deref(), Some("orders"));
        let pod_ip = env["POD_IP"]
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .expect("fieldRef");
        assert_eq!(pod_ip.field_path, "status.podIP");
        assert_eq!(
            spec.service_account_name.as_deref(),
            Some("orders-instance")
        );
    }

    /// The environment the pod builder writes is what the instance
    /// manager reads: values and downward-API fields resolved as the kubelet
    /// would, then parsed by the instance side's own parser.
    #[test]
    fn the_pod_environment_round_trips_through_the_instance_managers_parser() {
        use tusk_api::contract::{Credential, InstanceEnvironment};

        let mut archiving = small();
        archiving["backup"] = serde_json::json!({"destination": {
            "url": "s3://backups/prod", "endpoint": "https://minio.example:9000",
            "credentialsSecret": "orders-s3", "caSecret": "orders-s3-ca"
        }});
        let spec = pod(archiving, Some("primary")).spec.expect("spec");
        let postgres = &spec.containers[0];
        let kubelet = |path: &str| match path {
            "metadata.name" => Some("orders-1".to_owned()),
            "metadata.namespace" => Some("shop".to_owned()),
            "status.podIP" => Some("10.0.0.7".to_owned()),
            _ => None,
        };
        let secret =
            |selector: &SecretKeySelector| match (selector.name.as_str(), selector.key.as_str()) {
                ("orders-s3", "ACCESS_KEY_ID") => Some("AKIA-EXAMPLE".to_owned()),
                ("orders-s3", "SECRET_ACCESS_KEY") => Some("example-secret".to_owned()),
                _ => None,
            };
        let resolved: BTreeMap<String, String> = postgres
            .env
            .clone()
            .expect("env")
            .into_iter()
            .filter_map(|var| {
                let value = match (var.value, var.value_from) {
                    (Some(value), _) => Some(value),
                    (None, Some(source)) => match (source.field_ref, source.secret_key_ref) {
                        (Some(field), _) => kubelet(&field.field_path),
                        (None, Some(selector)) => secret(&selector),
                        (None, None) => None,
                    },
                    (None, None) => None,
                };
                Some((var.name, value?))
            })
            .collect();
        let parsed = InstanceEnvironment::from_lookup(|name| resolved.get(name).cloned())
            .expect("the instance manager accepts the pod's environment");
        assert_eq!(
            parsed,
            InstanceEnvironment {
                pod_name: "orders-1".into(),
                namespace: "shop".into(),
                cluster_name: "orders".into(),
                pod_ip: "10.0.0.7".parse().expect("ip"),
                pgdata: PGDATA.into(),
                bin_dir: "/usr/lib/postgresql/16/bin".into(),
                secrets_dir: SECRETS_DIR.into(),
                run_dir: RUN_DIR.into(),
                postgres_port: POSTGRES_PORT,
                http_port: HTTP_PORT,
                os_user: tusk_api::contract::DEFAULT_OS_USER.into(),
                stop_timeout_seconds: tusk_api::contract::DEFAULT_STOP_TIMEOUT_SECONDS,
                repository_keys: Some(tusk_api::contract::RepositoryKeys {
                    access_key_id: "AKIA-EXAMPLE".into(),
                    secret_access_key: "example-secret".into(),
                }),
            }
        );
        // The CA the instance manager's pgBackRest configuration names is
        // mounted there.
        let ca = tusk_api::contract::backup_ca_file(&parsed.secrets_dir);
        let ca_mount = postgres
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| ca.starts_with(&m.mount_path))
            .expect("the CA is mounted");
        let ca_volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == ca_mount.name)
            .and_then(|v| v.secret.as_ref())
            .and_then(|s| s.secret_name.clone());
        assert_eq!(ca_volume.as_deref(), Some("orders-s3-ca"));
        // Every credential the manager reads is mounted where it looks.
        let mounts = postgres.volume_mounts.clone().expect("mounts");
        for credential in Credential::ALL {
            let wanted = parsed.secrets_dir.join(credential.mount_name());
            assert!(
                mounts
                    .iter()
                    .any(|m| std::path::Path::new(&m.mount_path) == wanted),
                "{} is mounted",
                wanted.display()
            );
        }
        // The PGDATA the manager uses lies on the data volume.
        assert!(parsed.pgdata.starts_with(DATA_MOUNT));
    }

    #[test]
    fn the_pod_follows_the_restricted_security_profile() {
        let spec = pod(small(), None).spec.expect("spec");
        let pod_security = spec.security_context.expect("pod security context");
        assert_eq!(pod_security.run_as_non_root, Some(true));
        assert_ne!(pod_security.run_as_user, Some(0));
        for container in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let security = container
                .security_context
                .clone()
                .expect("container security context");
            assert_eq!(
                security.allow_privilege_escalation,
                Some(false),
                "{}",
                container.name
            );
            assert_eq!(
                security.read_only_root_filesystem,
                Some(true),
                "{}",
                container.name
            );
            assert_eq!(
                security.capabilities.and_then(|c| c.drop),
                Some(vec!["ALL".to_owned()])
            );
            assert_eq!(
                security.seccomp_profile.map(|s| s.type_).as_deref(),
                Some("RuntimeDefault")
            );
        }
        // With a read-only root, PostgreSQL needs writable data, run and tmp volumes.
        let mounts = spec.containers[0].volume_mounts.clone().expect("mounts");
        for path in [DATA_MOUNT, "/run", "/tmp"] {
            let writable = mounts
                .iter()
                .any(|m| m.mount_path == path && m.read_only != Some(true));
            assert!(writable, "{path} must be writable");
        }
    }

    #[test]
    fn probes_use_the_instance_managers_endpoints() {
        let spec = pod(small(), None).spec.expect("spec");
        let postgres = &spec.containers[0];
        let path = |p: &Option<Probe>| {
            p.as_ref()
                .and_then(|p| p.http_get.as_ref())
                .and_then(|h| h.path.clone())
        };
        assert_eq!(path(&postgres.readiness_probe).as_deref(), Some("/readyz"));
        assert_eq!(path(&postgres.liveness_probe).as_deref(), Some("/healthz"));
        assert_eq!(path(&postgres.startup_probe).as_deref(), Some("/healthz"));
    }

    #[test]
    fn the_role_label_is_set_only_when_known() {
        let labels_of = |p: Pod| p.metadata.labels.expect("labels");
        let primary = labels_of(pod(small(), Some("primary")));
        assert_eq!(primary[labels::ROLE], "primary");
        assert_eq!(primary[labels::INSTANCE], "orders-1");
        assert!(!labels_of(pod(small(), None)).contains_key(labels::ROLE));
    }

    #[test]
    fn pod_template_extensions_are_applied_and_defaults_spread_instances() {
        let mut spec = small();
        spec["podTemplate"] = serde_json::json!({
            "labels": {"team": "payments"},
            "annotations": {"example.com/owner": "payments"},
            "nodeSelector": {"disk": "ssd"},
            "priorityClassName": "databases",
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
        });
        let pod = pod(spec, None);
        assert_eq!(pod.metadata.labels.expect("labels")["team"], "payments");
        assert_eq!(
            pod.metadata.annotations.expect("annotations")["example.com/owner"],
            "payments"
        );
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.node_selector.expect("nodeSelector")["disk"], "ssd");
        assert_eq!(spec.priority_class_name.as_deref(), Some("databases"));
        assert_eq!(spec.tolerations.expect("tolerations").len(), 1);
        let anti = spec
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .expect("default anti-affinity");
        assert!(
            anti.preferred_during_scheduling_ignored_during_execution
                .is_some()
        );
    }

    #[test]
    fn resources_come_from_the_spec() {
        let mut spec = small();
        spec["resources"] = serde_json::json!({"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}});
        let container = &pod(spec, None).spec.expect("spec").containers[0];
        let resources = container.resources.clone().expect("resources");
        assert_eq!(resources.limits.expect("limits")["memory"].0, "8Gi");
    }
}
