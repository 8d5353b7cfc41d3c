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

/// The container's environment as the kubelet resolves it for pod
/// `orders-1` (downward-API fields, the keys of Secret `orders-s3`, and
/// those of Secrets `*-azure`: `<secret>-account`, `<secret>-key`).
fn resolved_env(postgres: &Container) -> BTreeMap<String, String> {
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
            (azure, "AZURE_STORAGE_ACCOUNT") if azure.ends_with("-azure") => {
                Some(format!("{azure}-account"))
            }
            (azure, "AZURE_STORAGE_KEY") if azure.ends_with("-azure") => {
                Some(format!("{azure}-key"))
            }
            _ => None,
        };
    postgres
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
        .collect()
}

/// The mount of the postgres container holding `path`, and its volume.
fn volume_at<'s>(
    spec: &'s PodSpec,
    path: &std::path::Path,
) -> Option<(&'s VolumeMount, &'s Volume)> {
    let mount = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| path.starts_with(&m.mount_path))?;
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)?;
    Some((mount, volume))
}

/// The Secret mounted at a directory holding `path`, in `spec`.
fn secret_mounted_at(spec: &PodSpec, path: &std::path::Path) -> Option<String> {
    volume_at(spec, path)?
        .1
        .secret
        .as_ref()?
        .secret_name
        .clone()
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
    // Restored from another cluster's repository, with its own CA.
    archiving["bootstrap"] = serde_json::json!({"recovery": {"cluster": "old-orders", "source": {
        "url": "s3://backups/prod", "endpoint": "https://minio.example:9000",
        "credentialsSecret": "orders-s3", "caSecret": "old-orders-ca"
    }}});
    let spec = pod(archiving, Some("primary")).spec.expect("spec");
    let postgres = &spec.containers[0];
    let resolved = resolved_env(postgres);
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
            repositories_dir: REPOSITORIES_DIR.into(),
            run_dir: RUN_DIR.into(),
            postgres_port: POSTGRES_PORT,
            http_port: HTTP_PORT,
            os_user: tusk_api::contract::DEFAULT_OS_USER.into(),
            stop_timeout_seconds: tusk_api::contract::DEFAULT_STOP_TIMEOUT_SECONDS,
            api_tls: true,
            repository_keys: Some(tusk_api::contract::RepositoryKeys::s3(
                "AKIA-EXAMPLE".into(),
                "example-secret".into(),
            )),
            source_keys: Some(tusk_api::contract::RepositoryKeys::s3(
                "AKIA-EXAMPLE".into(),
                "example-secret".into(),
            )),
        }
    );
    // The CAs the instance manager's pgBackRest configurations name
    // (its own repository's, the restore source's) are mounted there.
    for (ca, secret) in [
        (
            tusk_api::contract::backup_ca_file(&parsed.secrets_dir),
            "orders-s3-ca",
        ),
        (
            tusk_api::contract::restore_ca_file(&parsed.secrets_dir),
            "old-orders-ca",
        ),
    ] {
        assert_eq!(secret_mounted_at(&spec, &ca).as_deref(), Some(secret));
    }
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

/// A GCS service account's key is a file: the credentials Secret is
/// mounted, readable by the pod's group alone, where the configuration
/// the instance manager renders from the same spec names it, and none of
/// its keys is in the environment.
#[test]
fn a_gcs_key_is_mounted_where_the_repository_names_it() {
    let mut gcs = small();
    gcs["backup"] = serde_json::json!({"destination": {
        "url": "gs://backups/prod", "credentialsSecret": "orders-gcs"}});
    gcs["bootstrap"] = serde_json::json!({"recovery": {"cluster": "old-orders", "source": {
        "url": "gs://old/prod", "credentialsSecret": "old-orders-gcs"}}});
    let cluster: tusk_api::v1alpha1::PostgresClusterSpec =
        serde_json::from_value(gcs.clone()).expect("spec");
    let spec = pod(gcs, Some("primary")).spec.expect("spec");
    let dirs = tusk_api::contract::MountDirs::in_pod();
    let archive = cluster
        .wal_archive(&dirs)
        .expect("archives")
        .expect("valid");
    let source = cluster
        .restore_source("shop", &dirs)
        .expect("restores")
        .expect("valid");
    for (repository, secret) in [
        (archive, "orders-gcs"),
        (source.repository, "old-orders-gcs"),
    ] {
        let tusk_postgres::pgbackrest::Store::Gcs(bucket) = repository.store else {
            panic!("a GCS bucket");
        };
        let key = std::path::PathBuf::from(bucket.key_file.expect("a key file"));
        assert_eq!(secret_mounted_at(&spec, &key).as_deref(), Some(secret));
        let (_, volume) = volume_at(&spec, &key).expect("mounted");
        let mode = volume.secret.as_ref().and_then(|s| s.default_mode);
        assert_eq!(mode, Some(0o440), "a key is not for every user");
    }
    let named = spec.containers[0].env.iter().flatten().any(|var| {
        var.value_from
            .as_ref()
            .and_then(|f| f.secret_key_ref.as_ref())
            .is_some_and(|r| r.name.ends_with("-gcs"))
    });
    assert!(!named, "no GCS credential in the environment");
}

/// An Azure destination's and an Azure restore source's storage account
/// and key reach the instance manager from their Secrets' keys, each as
/// the keys of its own repository, and pgBackRest under its Azure names.
#[test]
fn azure_keys_reach_the_instance_manager_from_their_secrets() {
    let mut azure = small();
    azure["backup"] = serde_json::json!({"destination": {
        "url": "az://backups/prod", "credentialsSecret": "orders-azure"}});
    azure["bootstrap"] = serde_json::json!({"recovery": {"cluster": "old-orders", "source": {
        "url": "az://old/prod", "credentialsSecret": "old-orders-azure"}}});
    let spec = pod(azure, Some("primary")).spec.expect("spec");
    let resolved = resolved_env(&spec.containers[0]);
    let parsed = tusk_api::contract::InstanceEnvironment::from_lookup(|n| resolved.get(n).cloned())
        .expect("the instance manager accepts the pod's environment");
    let repository = parsed.repository_keys.expect("the destination's keys");
    assert_eq!(
        repository.environment(),
        [
            ("PGBACKREST_REPO1_AZURE_ACCOUNT", "orders-azure-account"),
            ("PGBACKREST_REPO1_AZURE_KEY", "orders-azure-key")
        ]
    );
    let source = parsed.source_keys.expect("the source's keys");
    assert_eq!(
        source.environment(),
        [
            ("PGBACKREST_REPO1_AZURE_ACCOUNT", "old-orders-azure-account"),
            ("PGBACKREST_REPO1_AZURE_KEY", "old-orders-azure-key")
        ]
    );
    // Nothing of Azure's is mounted as a file.
    assert!(
        !spec
            .volumes
            .iter()
            .flatten()
            .any(|v| v.secret.as_ref().is_some_and(|s| s
                .secret_name
                .as_deref()
                .is_some_and(|n| n.ends_with("-azure")))),
        "no Azure key in a volume"
    );
}

/// The claim of the volume mounted, writable, at a directory holding
/// `path`.
fn claim_mounted_at(spec: &PodSpec, path: &std::path::Path) -> Option<String> {
    let (mount, volume) = volume_at(spec, path)?;
    assert!(
        !mount.read_only.unwrap_or(false),
        "{} is writable",
        mount.mount_path
    );
    Some(volume.persistent_volume_claim.as_ref()?.claim_name.clone())
}

/// A `file://` repository's volume is mounted where the instance
/// manager, reading the pod's environment, puts pgBackRest's repository;
/// a claim named by both the destination and the restore source is
/// mounted once, and a pod with no such repository is as before.
#[test]
fn a_volume_repository_is_mounted_where_the_instance_manager_looks() {
    use tusk_api::contract::{InstanceEnvironment, MountDirs};

    let volume = |claim: &str| serde_json::json!({"url": "file:///pg", "volumeClaim": claim});
    let read = |source_claim: &str| {
        let mut spec = small();
        spec["backup"] = serde_json::json!({"destination": volume("backups")});
        spec["bootstrap"] = serde_json::json!({"recovery": {
            "cluster": "old-orders", "source": volume(source_claim)}});
        let cluster: tusk_api::v1alpha1::PostgresClusterSpec =
            serde_json::from_value(spec.clone()).expect("spec");
        let pod_spec = pod(spec, None).spec.expect("spec");
        let resolved = resolved_env(&pod_spec.containers[0]);
        let env = InstanceEnvironment::from_lookup(|name| resolved.get(name).cloned())
            .expect("the instance manager accepts the pod's environment");
        let dirs = MountDirs {
            secrets: env.secrets_dir,
            repositories: env.repositories_dir,
        };
        let archive = cluster
            .wal_archive(&dirs)
            .expect("archives")
            .expect("a volume repository");
        let source = cluster
            .restore_source("shop", &dirs)
            .expect("restores")
            .expect("a volume repository");
        let claims = |path: String| claim_mounted_at(&pod_spec, std::path::Path::new(&path));
        let mounted = (
            claims(archive.cluster_path("shop", "orders")),
            claims(source.repository.cluster_path("shop", "old-orders")),
        );
        let volumes = pod_spec.volumes.iter().flatten();
        let claim_volumes = volumes
            .filter(|v| v.persistent_volume_claim.is_some())
            .count();
        (mounted, claim_volumes)
    };
    assert_eq!(
        read("old-backups"),
        (
            (Some("backups".into()), Some("old-backups".into())),
            3 // the data volume and two repositories
        )
    );
    assert_eq!(
        read("backups"),
        ((Some("backups".into()), Some("backups".into())), 2)
    );

    let plain = pod(small(), None).spec.expect("spec");
    assert!(
        plain.containers[0]
            .env
            .iter()
            .flatten()
            .all(|e| e.name != InstanceEnv::REPOSITORIES_DIR),
        "a pod without a volume repository keeps its template"
    );
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
    // An hour for a first clone before liveness takes over.
    let startup = postgres.startup_probe.clone().expect("a startup probe");
    let period = startup.period_seconds.unwrap_or(10);
    assert!(period * startup.failure_threshold.unwrap_or(3) >= 3600);
    // The API is served over HTTPS, and the operator reads that from the
    // probes: they must agree with the manager's environment.
    for probe in [
        &postgres.readiness_probe,
        &postgres.liveness_probe,
        &postgres.startup_probe,
    ] {
        let scheme = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.scheme.clone());
        assert_eq!(scheme.as_deref(), Some("HTTPS"));
    }
    let resolved = resolved_env(postgres);
    assert_eq!(
        resolved
            .get(tusk_api::contract::InstanceEnv::API_TLS)
            .map(String::as_str),
        Some("true")
    );
    assert!(crate::instance_api::served_over_https(&pod(small(), None)));
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
fn declared_spread_and_pull_secrets_reach_the_pod_and_nothing_by_default() {
    let plain = pod(small(), None).spec.expect("spec");
    assert_eq!(plain.topology_spread_constraints, None);
    assert_eq!(plain.image_pull_secrets, None);
    let mut spec = small();
    spec["podTemplate"] = serde_json::json!({
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"tusk.dev/cluster": "orders"}}}],
        "imagePullSecrets": [{"name": "registry"}]
    });
    let spec = pod(spec, None).spec.expect("spec");
    let spread = spec
        .topology_spread_constraints
        .expect("the declared spread");
    assert_eq!(spread[0].topology_key, "topology.kubernetes.io/zone");
    assert_eq!(spread[0].when_unsatisfiable, "ScheduleAnyway");
    assert_eq!(
        spec.image_pull_secrets.expect("pull secrets")[0].name,
        "registry"
    );
}

#[test]
fn resources_come_from_the_spec() {
    let mut spec = small();
    spec["resources"] =
        serde_json::json!({"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}});
    let container = &pod(spec, None).spec.expect("spec").containers[0];
    let resources = container.resources.clone().expect("resources");
    assert_eq!(resources.limits.expect("limits")["memory"].0, "8Gi");
}

#[test]
fn the_owners_server_certificate_is_mounted_beside_the_clusters() {
    let mut spec = small();
    spec["certificates"] = serde_json::json!({"serverSecret": "orders-server-cert"});
    let pod_spec = pod(spec, None).spec.expect("spec");
    let volume = pod_spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == POSTGRES_TLS_MOUNT)
        .expect("the owner's certificate volume");
    let secret = volume.secret.as_ref().expect("a Secret volume");
    assert_eq!(secret.secret_name.as_deref(), Some("orders-server-cert"));
    assert_eq!(secret.default_mode, Some(0o440), "it holds a key");
    let mounted = pod_spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.name == POSTGRES_TLS_MOUNT && m.mount_path == "/etc/tusk/secrets/postgres-tls");
    assert!(mounted);
    // The cluster's own stay: replication and the instance API use them.
    for name in ["server-tls", "replication-tls"] {
        assert!(
            pod_spec.volumes.iter().flatten().any(|v| v.name == name),
            "{name}"
        );
    }
    let plain = pod(small(), None).spec.expect("spec");
    assert!(
        !plain
            .volumes
            .iter()
            .flatten()
            .any(|v| v.name == POSTGRES_TLS_MOUNT)
    );
}

/// An instance gets the backup client's certificate and the token key's
/// public half, never a Secret holding the token key's private half nor
/// the authority's: a node may read every Secret its pods mount, whatever
/// keys a volume selects.
#[test]
fn an_instance_mounts_the_backup_client_and_the_token_keys_public_half_alone() {
    use tusk_api::contract::{SECRETS_DIR, TlsSecret};

    let pod = pod(small(), None);
    let spec = pod.spec.as_ref().expect("spec");
    let dir = |which: TlsSecret| {
        std::path::Path::new(SECRETS_DIR).join(which.mount_name().expect("mounted"))
    };
    assert_eq!(
        secret_mounted_at(spec, &dir(TlsSecret::BackupClient)).as_deref(),
        Some("orders-backup-client-cert")
    );
    assert_eq!(
        secret_mounted_at(spec, &dir(TlsSecret::TokenPublicKey)).as_deref(),
        Some("orders-api-token-pub")
    );
    let secrets: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.as_deref())
        .collect();
    assert!(!secrets.contains(&"orders-ca-key"), "{secrets:?}");
    assert!(!secrets.contains(&"orders-api-token-key"), "{secrets:?}");
}
