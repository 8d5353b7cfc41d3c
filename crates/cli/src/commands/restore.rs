//! `tusk restore SOURCE NEW`: the manifest of a new cluster restored from
//! SOURCE's backups (point in time with `--time`, `--lsn` or `--name`),
//! printed as YAML, or created with `--apply`.
//!
//! The new cluster takes SOURCE's version, instances, storage and
//! parameters; it reads SOURCE's repository (`spec.backup.destination`)
//! and archives to the same destination under its own path. Credentials
//! and CA Secrets are read in the new cluster's namespace: when it is
//! another one, copy them there first (the command says so).
//!
//! Exit codes: 0 printed or created, 1 refused (SOURCE has no
//! destination to restore from), 2 the command could not run.

use std::process::ExitCode;

use kube::api::{Api, PostParams};
use serde_json::json;
use tusk_api::v1alpha1::PostgresCluster;

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::{out, outln};

#[derive(clap::Args)]
pub struct Args {
    /// The cluster whose backups are restored.
    #[command(flatten)]
    pub at: ClusterRef,
    /// The new cluster's name.
    pub new: String,
    /// The new cluster's namespace [default: the source's].
    #[arg(long)]
    pub into: Option<String>,
    /// Recover up to this moment (RFC 3339) [default: the end of the
    /// archived WAL].
    #[arg(long, conflicts_with_all = ["lsn", "point"])]
    pub time: Option<String>,
    /// Recover up to this WAL position.
    #[arg(long, conflicts_with = "point")]
    pub lsn: Option<String>,
    /// Recover up to this restore point.
    #[arg(long = "name")]
    pub point: Option<String>,
    /// Create the cluster instead of printing it.
    #[arg(long)]
    pub apply: bool,
}

/// Where a restore stops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopAt {
    pub time: Option<String>,
    pub lsn: Option<String>,
    pub point: Option<String>,
}

/// The new cluster `name` in `namespace` restored from `source` to
/// `target`; why not, when `source` declares no destination.
pub fn recovery_cluster(
    source: &PostgresCluster,
    name: &str,
    namespace: &str,
    target: &StopAt,
) -> Result<PostgresCluster, String> {
    let source_name = source.metadata.name.clone().unwrap_or_default();
    let destination = source
        .spec
        .backup
        .as_ref()
        .map(|b| &b.destination)
        .ok_or_else(|| {
            format!(
                "{source_name} declares no spec.backup.destination: it has no backups to restore"
            )
        })?;
    let mut recovery = json!({
        "cluster": source_name,
        "namespace": source.metadata.namespace,
        "source": destination,
    });
    for (key, value) in [
        ("targetTime", &target.time),
        ("targetLsn", &target.lsn),
        ("targetName", &target.point),
    ] {
        if let Some(value) = value {
            recovery[key] = json!(value);
        }
    }
    let spec = &source.spec;
    serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "instances": spec.instances,
            "postgres": spec.postgres,
            "storage": spec.storage,
            "resources": spec.resources,
            "replication": spec.replication,
            "failover": spec.failover,
            "bootstrap": {"recovery": recovery},
            "backup": {"destination": destination, "retentionDays": spec.backup.as_ref().map(|b| b.retention_days)},
        },
    }))
    .map_err(|e| format!("cannot build the new cluster: {e}"))
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(restore(args))
}

async fn restore(args: &Args) -> Result<ExitCode, CommandError> {
    let target = Target::connect(args.at.namespace.as_deref()).await?;
    let source = target.cluster(&args.at.cluster).await?;
    let namespace = args
        .into
        .clone()
        .unwrap_or_else(|| target.namespace.clone());
    let stop = StopAt {
        time: args.time.clone(),
        lsn: args.lsn.clone(),
        point: args.point.clone(),
    };
    let cluster = match recovery_cluster(&source, &args.new, &namespace, &stop) {
        Ok(cluster) => cluster,
        Err(refusal) => {
            eprintln!("refused: {refusal}");
            return Ok(ExitCode::from(1));
        }
    };
    if namespace != target.namespace {
        eprintln!(
            "note: the Secrets spec.backup.destination names are read in {namespace}: copy them there first"
        );
    }
    if !args.apply {
        let yaml = serde_yaml_ng::to_string(&cluster)
            .map_err(|e| CommandError::Kubernetes(format!("cannot print YAML: {e}")))?;
        out!("{yaml}")?;
        return Ok(ExitCode::SUCCESS);
    }
    Api::<PostgresCluster>::namespaced(target.client.clone(), &namespace)
        .create(&PostParams::default(), &cluster)
        .await
        .map_err(kubernetes)?;
    outln!(
        "postgrescluster/{} created in {namespace}, restoring from {}/{}; follow it with: kubectl tusk status {} -n {namespace}",
        args.new,
        target.namespace,
        args.at.cluster,
        args.new
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(backup: bool) -> PostgresCluster {
        let mut spec = json!({"instances": 3, "postgres": {"version": 15, "parameters": {"work_mem": "8MB"}},
                              "storage": {"size": "20Gi"}});
        if backup {
            spec["backup"] = json!({"destination": {"url": "s3://b/prod", "credentialsSecret": "s3"},
                                    "retentionDays": 14, "schedule": "@daily"});
        }
        serde_json::from_value(json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "orders", "namespace": "shop"}, "spec": spec}))
        .expect("a cluster")
    }

    #[test]
    fn the_new_cluster_reads_the_sources_repository_and_keeps_its_shape() {
        let target = StopAt {
            time: Some("2026-12-04T18:00:00Z".into()),
            ..StopAt::default()
        };
        let copy =
            recovery_cluster(&source(true), "orders-copy", "staging", &target).expect("a cluster");
        assert_eq!(copy.metadata.namespace.as_deref(), Some("staging"));
        assert_eq!(copy.spec.instances, 3);
        assert_eq!(copy.spec.storage.size, "20Gi");
        assert_eq!(copy.spec.postgres.parameters["work_mem"], "8MB");
        let recovery = copy
            .spec
            .bootstrap
            .and_then(|b| b.recovery)
            .expect("a recovery");
        assert_eq!(
            (recovery.cluster.as_str(), recovery.namespace.as_deref()),
            ("orders", Some("shop"))
        );
        assert_eq!(recovery.source.url, "s3://b/prod");
        assert_eq!(
            recovery.target_time.as_deref(),
            Some("2026-12-04T18:00:00Z")
        );
        let backup = copy.spec.backup.expect("its own archive");
        assert_eq!(backup.destination.url, "s3://b/prod");
        assert_eq!(backup.retention_days, 14);
        assert_eq!(backup.schedule, None, "no schedule is copied");
    }

    #[test]
    fn a_source_without_a_destination_is_refused_by_name() {
        let error = recovery_cluster(&source(false), "copy", "shop", &StopAt::default())
            .expect_err("nothing to restore");
        assert!(
            error.contains("orders declares no spec.backup.destination"),
            "{error}"
        );
    }
}
