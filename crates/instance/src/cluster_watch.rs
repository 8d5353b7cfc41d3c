//! The desired state from the Kubernetes API: a watch on this instance's
//! PostgresCluster (and a lookup of the target primary's pod IP), with the
//! pod's own credentials.

use std::net::IpAddr;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tusk_api::labels;
use tusk_api::v1alpha1::{PostgresCluster, SynchronousMode};

use crate::desired::DesiredState;
use crate::postgres::config::Synchronous;

#[derive(Debug, thiserror::Error)]
pub enum ClusterWatchError {
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// How often the target primary's pod IP is looked up again (a primary pod
/// recreated elsewhere gets a new IP without any change to the cluster).
const ADDRESS_REFRESH: Duration = Duration::from_secs(5);

/// True when the fencing annotation value names `instance` (or `*`). The
/// value is a JSON list of names or a comma-separated list.
pub fn is_fenced(annotation: Option<&str>, instance: &str) -> bool {
    let Some(value) = annotation.map(str::trim).filter(|v| !v.is_empty()) else {
        return false;
    };
    let names: Vec<String> = if value.starts_with('[') {
        serde_json::from_str(value).unwrap_or_default()
    } else {
        value.split(',').map(|n| n.trim().to_owned()).collect()
    };
    names.iter().any(|name| name == instance || name == "*")
}

/// The desired state of instance `me` in `cluster`, with the target
/// primary's pod IP when it is known.
pub fn desired_from_cluster(
    cluster: &PostgresCluster,
    me: &str,
    primary_address: Option<IpAddr>,
) -> DesiredState {
    let status = cluster.status.as_ref();
    let fenced = is_fenced(
        cluster
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::FENCED_INSTANCES))
            .map(String::as_str),
        me,
    );
    let others: Vec<String> = status
        .map(|s| {
            s.instances
                .iter()
                .map(|i| i.name.clone())
                .filter(|name| name != me)
                .collect()
        })
        .unwrap_or_default();
    let synchronous = cluster
        .spec
        .replication
        .as_ref()
        .and_then(|r| r.synchronous.as_ref())
        .map(|sync| Synchronous {
            quorum: sync.mode == SynchronousMode::Any,
            number: u32::try_from(sync.number).unwrap_or(1),
            standby_names: others,
        });
    let initdb = cluster
        .spec
        .bootstrap
        .as_ref()
        .and_then(|b| b.initdb.clone())
        .unwrap_or_default();
    DesiredState {
        target_primary: status.and_then(|s| s.target_primary.clone()),
        primary_address,
        fenced,
        parameters: cluster.spec.postgres.parameters.clone(),
        synchronous,
        database: initdb.database,
        owner: initdb.owner,
    }
}

/// Watches cluster `cluster` in `namespace` for instance `me` with the
/// client configured in-cluster or from `KUBECONFIG`; the receiver holds the
/// latest desired state.
pub async fn start(
    namespace: &str,
    cluster: &str,
    me: &str,
) -> Result<watch::Receiver<Option<DesiredState>>, ClusterWatchError> {
    Ok(start_with_client(
        Client::try_default().await?,
        namespace,
        cluster,
        me,
    ))
}

/// [`start`] with a given client.
pub fn start_with_client(
    client: Client,
    namespace: &str,
    cluster: &str,
    me: &str,
) -> watch::Receiver<Option<DesiredState>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(run(
        client,
        namespace.to_owned(),
        cluster.to_owned(),
        me.to_owned(),
        sender,
    ));
    receiver
}

async fn run(
    client: Client,
    namespace: String,
    cluster_name: String,
    me: String,
    sender: watch::Sender<Option<DesiredState>>,
) {
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={cluster_name}"));
    let mut events = watcher(clusters, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut latest: Option<PostgresCluster> = None;
    let mut pod_error: Option<String> = None;
    let mut refresh = tokio::time::interval(ADDRESS_REFRESH);
    loop {
        tokio::select! {
            event = events.try_next() => match event {
                Ok(Some(cluster)) => latest = Some(cluster),
                Ok(None) => {
                    tracing::warn!("cluster watch ended");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "cluster watch error; retrying");
                    continue;
                }
            },
            _ = refresh.tick() => {}
        }
        let Some(cluster) = &latest else { continue };
        let target = cluster
            .status
            .as_ref()
            .and_then(|s| s.target_primary.clone());
        let address = match &target {
            Some(name) => primary_address(&pods, name, &mut pod_error).await,
            None => None,
        };
        let desired = desired_from_cluster(cluster, &me, address);
        sender.send_if_modified(|current| {
            if current.as_ref() == Some(&desired) {
                false
            } else {
                tracing::info!(
                    target_primary = ?desired.target_primary,
                    primary_address = ?desired.primary_address,
                    fenced = desired.fenced,
                    "desired state changed"
                );
                *current = Some(desired);
                true
            }
        });
    }
}

/// The pod IP of `name`. The last failure is remembered in `last_error`
/// so that a lasting one (a Role without `get` on pods) is logged once,
/// not every few seconds.
async fn primary_address(
    pods: &Api<Pod>,
    name: &str,
    last_error: &mut Option<String>,
) -> Option<IpAddr> {
    match pods.get_opt(name).await {
        Ok(pod) => {
            *last_error = None;
            pod?.status?.pod_ip?.parse().ok()
        }
        Err(error) => {
            let text = error.to_string();
            if last_error.as_deref() != Some(text.as_str()) {
                let forbidden = matches!(&error, kube::Error::Api(status) if status.code == 403);
                if forbidden {
                    tracing::error!(%error, pod = name, "the instance's Role must allow get on pods to learn the primary's address");
                } else {
                    tracing::warn!(%error, pod = name, "cannot read the primary's pod");
                }
                *last_error = Some(text);
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(yaml: &str) -> PostgresCluster {
        serde_json::from_value(
            serde_json::to_value(serde_yaml_ng::from_str::<serde_json::Value>(yaml).expect("yaml"))
                .expect("json"),
        )
        .expect("a PostgresCluster")
    }

    const CLUSTER: &str = r#"
apiVersion: postgres.tusk.dev/v1alpha1
kind: PostgresCluster
metadata:
  name: db
  annotations:
    tusk.dev/fenced-instances: '["db-3"]'
spec:
  instances: 3
  postgres:
    version: 15
    parameters:
      work_mem: 8MB
  storage:
    size: 1Gi
  replication:
    synchronous:
      mode: first
      number: 1
  bootstrap:
    initdb:
      database: shop
      owner: shopper
status:
  targetPrimary: db-1
  instances:
    - {name: db-1, role: primary, ready: true}
    - {name: db-2, role: replica, ready: true}
    - {name: db-3, role: replica, ready: false}
"#;

    #[test]
    fn the_cluster_spec_and_status_become_the_desired_state() {
        let address: IpAddr = "10.0.0.9".parse().expect("ip");
        let desired = desired_from_cluster(&cluster(CLUSTER), "db-2", Some(address));
        assert_eq!(desired.target_primary.as_deref(), Some("db-1"));
        assert_eq!(desired.primary_address, Some(address));
        assert!(!desired.fenced);
        assert_eq!(
            desired.parameters.get("work_mem").map(String::as_str),
            Some("8MB")
        );
        assert_eq!(
            (desired.database.as_str(), desired.owner.as_str()),
            ("shop", "shopper")
        );
        assert_eq!(
            desired.synchronous,
            Some(Synchronous {
                quorum: false,
                number: 1,
                standby_names: vec!["db-1".into(), "db-3".into()],
            })
        );
        assert!(desired_from_cluster(&cluster(CLUSTER), "db-3", None).fenced);
    }

    #[test]
    fn fencing_annotation_forms() {
        let cases = [
            (None, "db-1", false),
            (Some(""), "db-1", false),
            (Some("[\"db-1\"]"), "db-1", true),
            (Some("[\"db-2\"]"), "db-1", false),
            (Some("db-2, db-1"), "db-1", true),
            (Some("*"), "db-1", true),
            (Some("[\"*\"]"), "db-7", true),
            (Some("db-10"), "db-1", false),
        ];
        for (annotation, instance, fenced) in cases {
            assert_eq!(
                is_fenced(annotation, instance),
                fenced,
                "{annotation:?} {instance}"
            );
        }
    }
}
