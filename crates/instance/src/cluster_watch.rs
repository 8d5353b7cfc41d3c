//! The desired state from the Kubernetes API: a watch on this instance's
//! PostgresCluster (and a lookup of the target primary's pod IP), with the
//! pod's own credentials.

use std::borrow::Cow;
use std::net::IpAddr;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tusk_api::contract::MountDirs;
use tusk_api::labels;
use tusk_api::v1alpha1::{
    LastValidSpec, PostgresCluster, PostgresClusterSpec, ROLE_PASSWORD_KEY, role_problems,
};

use crate::declared_roles::{DeclaredRole, RolePassword};
use crate::desired::DesiredState;
use crate::settings::Password;
use tusk_api::fencing::Fencing;

use crate::postgres::synchronous::SynchronousStandbys;

#[derive(Debug, thiserror::Error)]
pub enum ClusterWatchError {
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// How often the target primary's pod IP is looked up again (a primary pod
/// recreated elsewhere gets a new IP without any change to the cluster).
const ADDRESS_REFRESH: Duration = Duration::from_secs(5);

/// The desired state of instance `me` in `cluster`, with the target
/// primary's pod IP when it is known. The spec is the one in force
/// ([`spec_in_force`]), read the way the operator reads it (`tusk_api`'s
/// typed accessors); what cannot be read takes its safe value and is
/// listed in `problems`: a malformed fencing annotation fences the
/// instance, an impossible synchronous number keeps the `previous`
/// setting (none when there is none).
pub fn desired_from_cluster(
    cluster: &PostgresCluster,
    dirs: &MountDirs,
    me: &str,
    primary_address: Option<IpAddr>,
    previous: Option<&DesiredState>,
) -> DesiredState {
    let mut problems = Vec::new();
    let spec = spec_in_force(cluster, &mut problems);
    let spec = spec.as_ref();
    let status = cluster.status.as_ref();
    let annotation = cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::FENCED_INSTANCES))
        .map(String::as_str);
    let mut fenced = match Fencing::parse(annotation) {
        Ok(fencing) => fencing.covers(me),
        Err(error) => {
            problems.push(format!("{error}; the instance stays fenced"));
            true
        }
    };
    let others: Vec<String> = status
        .map(|s| {
            s.instances
                .iter()
                .map(|i| i.name.clone())
                .filter(|name| name != me)
                .collect()
        })
        .unwrap_or_default();
    let synchronous = match spec.synchronous() {
        Ok(rule) => rule.map(|rule| SynchronousStandbys {
            rule,
            candidates: others,
        }),
        Err(error) => {
            problems.push(format!(
                "spec.replication.synchronous.number: {error}; the last valid setting is kept"
            ));
            previous.and_then(|p| p.synchronous.clone())
        }
    };
    let archiving = match spec.wal_archive(dirs) {
        Some(Ok(repository)) => Some(repository),
        Some(Err(error)) => {
            problems.push(format!(
                "spec.backup.destination: {error}; WAL is not archived"
            ));
            None
        }
        None => None,
    };
    let restore = restore_source(cluster, spec, dirs, &mut fenced, &mut problems);
    let initdb = spec.initdb();
    let roles = declared_roles(spec, &initdb.owner, &mut problems);
    DesiredState {
        target_primary: status.and_then(|s| s.target_primary.clone()),
        primary_address,
        fenced,
        parameters: spec.server_parameters(),
        synchronous,
        lease_timing: tusk_api::primacy::LeaseTiming::for_delay(spec.failover.delay_seconds),
        lease_takeover: status.and_then(|s| s.primary_lease_takeover.clone()),
        database: initdb.database,
        owner: initdb.owner,
        superuser_access: spec.postgres.superuser_access,
        // The operator rolls restarts through the cluster (docs/operator.md).
        restart_for_pending: false,
        archiving,
        // Every instance sees the assignment: the one named takes the
        // backup, and the primary writes the sentinel of a standby's.
        backup: status
            .and_then(|s| s.backup.as_ref())
            .and_then(|b| b.running.clone()),
        restore,
        problems,
        roles,
    }
}

/// `spec.roles`, without their passwords (read apart, by the target
/// primary alone: [`read_passwords`]). A declaration that breaks the rules
/// is not acted on at all (listed in `problems`): the roles stay as they
/// are, and none is dropped.
fn declared_roles(
    spec: &PostgresClusterSpec,
    owner: &str,
    problems: &mut Vec<String>,
) -> Vec<DeclaredRole> {
    use tusk_postgres::roles::{REPLICATION, SUPERUSER};
    let found = role_problems(&spec.roles, &[SUPERUSER, REPLICATION, owner]);
    if let Some(first) = found.first() {
        problems.push(format!("{first}; no declared role is changed"));
        return Vec::new();
    }
    spec.roles
        .iter()
        .map(|spec| DeclaredRole {
            spec: spec.clone(),
            password: RolePassword::None,
        })
        .collect()
}

/// Reads each declared role's password from its Secret: a list narrowed
/// to its name by a field selector, which the instance's Role allows for
/// those names and no other (the operator, which never gets a Secret,
/// cannot grant `get`). A Secret that cannot be read is named in the
/// role's reason, never its content.
async fn read_passwords(secrets: &Api<Secret>, cluster: &str, roles: &mut [DeclaredRole]) {
    for role in roles {
        let Some(name) = role.spec.password_secret_name(cluster) else {
            continue;
        };
        let one = ListParams::default().fields(&format!("metadata.name={name}"));
        role.password = match secrets
            .list(&one)
            .await
            .map(|list| list.items.into_iter().next())
        {
            Ok(Some(secret)) => {
                let value = secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(ROLE_PASSWORD_KEY))
                    .map(|bytes| String::from_utf8(bytes.0.clone()));
                match value {
                    Some(Ok(password)) if !password.is_empty() => {
                        RolePassword::Known(Password::new(password))
                    }
                    Some(Ok(_)) => RolePassword::Unreadable(format!(
                        "the {ROLE_PASSWORD_KEY:?} key of Secret {name} is empty"
                    )),
                    Some(Err(_)) => RolePassword::Unreadable(format!(
                        "the {ROLE_PASSWORD_KEY:?} key of Secret {name} is not UTF-8"
                    )),
                    None => RolePassword::Unreadable(format!(
                        "Secret {name} has no {ROLE_PASSWORD_KEY:?} key"
                    )),
                }
            }
            Ok(None) => RolePassword::Unreadable(format!("Secret {name} does not exist")),
            Err(error) => RolePassword::Unreadable(format!("cannot read Secret {name}: {error}")),
        };
    }
}

/// The spec the operator last accepted (`status.lastValidSpec`): an
/// instance acts on no spec the operator refused, such as a parameter
/// value PostgreSQL would not start with (while the operator keeps the
/// cluster as that record declares it). The declared spec while there is
/// no record (a cluster an older operator made), or one that does not
/// read (listed in `problems`).
fn spec_in_force<'a>(
    cluster: &'a PostgresCluster,
    problems: &mut Vec<String>,
) -> Cow<'a, PostgresClusterSpec> {
    let record = cluster
        .status
        .as_ref()
        .and_then(|s| s.last_valid_spec.as_ref());
    match record.map(LastValidSpec::read) {
        Some(Ok(spec)) => Cow::Owned(spec),
        Some(Err(error)) => {
            problems.push(format!(
                "status.lastValidSpec does not read as a spec ({error}); the declared spec is used"
            ));
            Cow::Borrowed(&cluster.spec)
        }
        None => Cow::Borrowed(&cluster.spec),
    }
}

/// The declared restore's source. One that cannot be read must not become
/// an empty new cluster: the instance stays fenced (nothing is
/// bootstrapped) until it is fixed, and the problem is listed.
fn restore_source(
    cluster: &PostgresCluster,
    spec: &PostgresClusterSpec,
    dirs: &MountDirs,
    fenced: &mut bool,
    problems: &mut Vec<String>,
) -> Option<tusk_postgres::pgbackrest::RestoreSource> {
    let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
    match spec.restore_source(namespace, dirs)? {
        Ok(source) => Some(source),
        Err(error) => {
            problems.push(format!(
                "spec.bootstrap.recovery.source: {error}; the instance stays fenced"
            ));
            *fenced = true;
            None
        }
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
        &MountDirs::in_pod(),
    ))
}

/// [`start`] with a given client and the directories the pod mounts its
/// repositories' CAs and volumes under.
pub fn start_with_client(
    client: Client,
    namespace: &str,
    cluster: &str,
    me: &str,
    dirs: &MountDirs,
) -> watch::Receiver<Option<DesiredState>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(run(
        client,
        namespace.to_owned(),
        cluster.to_owned(),
        me.to_owned(),
        dirs.clone(),
        sender,
    ));
    receiver
}

async fn run(
    client: Client,
    namespace: String,
    cluster_name: String,
    me: String,
    dirs: MountDirs,
    sender: watch::Sender<Option<DesiredState>>,
) {
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
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
        let mut desired =
            desired_from_cluster(cluster, &dirs, &me, address, sender.borrow().as_ref());
        if desired.target_primary.as_deref() == Some(me.as_str()) {
            read_passwords(&secrets, &cluster_name, &mut desired.roles).await;
        }
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
                for problem in &desired.problems {
                    tracing::error!(%problem, "the cluster's declaration cannot be read");
                }
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
    use tusk_api::v1alpha1::SynchronousMode;

    use crate::postgres::synchronous::Synchronous;

    fn dirs() -> &'static MountDirs {
        static DIRS: std::sync::LazyLock<MountDirs> = std::sync::LazyLock::new(MountDirs::in_pod);
        &DIRS
    }

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
        let desired = desired_from_cluster(&cluster(CLUSTER), dirs(), "db-2", Some(address), None);
        assert_eq!(desired.target_primary.as_deref(), Some("db-1"));
        assert_eq!(desired.primary_address, Some(address));
        assert!(!desired.fenced);
        assert_eq!(
            desired.parameters.get("work_mem").map(String::as_str),
            Some("8MB")
        );
        // Required durability (the default) owns synchronous_commit.
        assert_eq!(
            desired
                .parameters
                .get("synchronous_commit")
                .map(String::as_str),
            Some("on")
        );
        assert_eq!(
            (desired.database.as_str(), desired.owner.as_str()),
            ("shop", "shopper")
        );
        assert_eq!(
            desired.synchronous,
            Some(SynchronousStandbys {
                rule: Synchronous {
                    mode: SynchronousMode::First,
                    number: 1
                },
                candidates: vec!["db-1".into(), "db-3".into()],
            })
        );
        assert!(desired_from_cluster(&cluster(CLUSTER), dirs(), "db-3", None, None).fenced);
    }

    fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> PostgresCluster {
        let mut value: serde_json::Value = serde_yaml_ng::from_str(CLUSTER).expect("yaml");
        edit(&mut value);
        serde_json::from_value(value).expect("a PostgresCluster")
    }

    #[test]
    fn a_malformed_fencing_annotation_fences_and_is_reported() {
        let cluster = edited(|c| {
            c["metadata"]["annotations"]["tusk.dev/fenced-instances"] = "[\"db-3\"".into();
        });
        for me in ["db-1", "db-2", "db-3"] {
            let desired = desired_from_cluster(&cluster, dirs(), me, None, None);
            assert!(desired.fenced, "{me} must stay stopped");
            assert!(
                desired
                    .problems
                    .iter()
                    .any(|p| p.contains("tusk.dev/fenced-instances")),
                "{me}: {:?}",
                desired.problems
            );
        }
    }

    /// A declared restore is never replaced by an empty `initdb`: one whose
    /// source cannot be read fences the instance, and says why.
    #[test]
    fn a_restore_is_read_with_its_target_or_fences_when_it_cannot_be() {
        let restoring = edited(|c| {
            c["spec"]["bootstrap"] = serde_json::json!({"recovery": {
                "cluster": "old", "source": {"url": "s3://b/p"}, "targetLsn": "0/3000060"}});
        });
        let desired = desired_from_cluster(&restoring, dirs(), "db-1", None, None);
        let source = desired.restore.expect("a restore");
        assert_eq!(
            (
                source.cluster.as_str(),
                source.repository.describe().as_str()
            ),
            ("old", "s3://b")
        );
        assert_eq!(
            source.target,
            tusk_postgres::pgbackrest::RecoveryTarget::Lsn("0/3000060".into())
        );
        assert!(!desired.fenced);

        let unreadable = edited(|c| {
            c["spec"]["bootstrap"] = serde_json::json!({"recovery": {
                "cluster": "old", "source": {"url": "az://b/p"}}});
        });
        let desired = desired_from_cluster(&unreadable, dirs(), "db-1", None, None);
        assert!(desired.fenced && desired.restore.is_none());
        assert!(
            desired
                .problems
                .iter()
                .any(|p| p.contains("spec.bootstrap.recovery.source")),
            "{:?}",
            desired.problems
        );
    }

    #[test]
    fn the_spec_the_operator_accepted_last_is_in_force() {
        let accepted = cluster(CLUSTER).spec;
        // A value PostgreSQL would not start with, refused by the operator.
        let refused = |recorded: Option<serde_json::Value>| {
            edited(|c| {
                c["spec"]["postgres"]["parameters"]["work_mem"] = "Retain".into();
                if let Some(spec) = recorded {
                    c["status"]["lastValidSpec"] =
                        serde_json::json!({"generation": 3, "spec": spec});
                }
            })
        };
        let work_mem = |desired: &DesiredState| desired.parameters.get("work_mem").cloned();
        let recorded = serde_json::to_value(&accepted).expect("json");
        let kept = desired_from_cluster(&refused(Some(recorded)), dirs(), "db-2", None, None);
        assert_eq!(work_mem(&kept).as_deref(), Some("8MB"));
        assert!(kept.problems.is_empty(), "{:?}", kept.problems);
        // Without a record (an older operator's cluster): the declared spec.
        let declared = desired_from_cluster(&refused(None), dirs(), "db-2", None, None);
        assert_eq!(work_mem(&declared).as_deref(), Some("Retain"));
        // A record that does not read is said, and the declared spec used.
        let unreadable = serde_json::json!({"instances": "three"});
        let said = desired_from_cluster(&refused(Some(unreadable)), dirs(), "db-2", None, None);
        assert_eq!(work_mem(&said).as_deref(), Some("Retain"));
        assert!(
            said.problems
                .iter()
                .any(|p| p.contains("status.lastValidSpec")),
            "{:?}",
            said.problems
        );
    }

    #[test]
    fn an_impossible_synchronous_number_is_reported_not_replaced() {
        let before = desired_from_cluster(&cluster(CLUSTER), dirs(), "db-2", None, None);
        assert!(before.problems.is_empty(), "{:?}", before.problems);
        for number in [-1, 0, 3, 7] {
            let cluster =
                edited(|c| c["spec"]["replication"]["synchronous"]["number"] = number.into());
            // Without an earlier setting: no synchronous rule is invented.
            let fresh = desired_from_cluster(&cluster, dirs(), "db-2", None, None);
            assert_eq!(fresh.synchronous, None, "number {number}");
            assert!(
                fresh
                    .problems
                    .iter()
                    .any(|p| p.contains("spec.replication.synchronous.number")),
                "number {number}: {:?}",
                fresh.problems
            );
            // With one: it is kept, as the operator keeps the last valid spec.
            let kept = desired_from_cluster(&cluster, dirs(), "db-2", None, Some(&before));
            assert_eq!(kept.synchronous, before.synchronous, "number {number}");
            assert_eq!(kept.problems, fresh.problems);
        }
    }
}
