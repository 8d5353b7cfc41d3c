//! Wiring: the kube-runtime Controller for PostgresCluster, owning its
//! children, with bounded concurrency and graceful shutdown (R7, R10, R12).
//!
//! Each child kind is watched once (only objects carrying the cluster
//! label); the same watch both triggers reconciles of the owning cluster
//! and fills the cache reconciles read children from. What enters a cache
//! is trimmed first to what reconciles read ([`Trim`]), and kept encoded
//! ([`Packed`]).

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::runtime::controller::Config;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresBackup;

use crate::cached_cluster::CachedCluster;
use crate::children::{CacheSync, Stores, Trim};
use crate::config::OperatorConfig;
use crate::context::Context;
use crate::metrics::Metrics;
use crate::packed::{Packed, pack_event};
use crate::reconcile::{error_policy, reconcile};

/// Options of one controller run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reconciles running at once (different clusters).
    pub concurrency: u16,
    /// Watch one namespace only (namespace-scoped mode, R17); all when `None`.
    pub namespace: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            concurrency: 4,
            namespace: None,
        }
    }
}

/// A watch of one child kind: its cache, and the stream that feeds it.
fn child<K>(
    client: &Client,
    namespace: Option<&str>,
) -> (
    Store<Packed<K>>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync,
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Trim + 'static,
{
    let api = match namespace {
        Some(ns) => Api::<K>::namespaced(client.clone(), ns),
        None => Api::<K>::all(client.clone()),
    };
    let (store, writer) = reflector::store();
    let events = watcher(api, watcher::Config::default().labels(labels::CLUSTER))
        .default_backoff()
        .modify(K::trim)
        .map_ok(pack_event);
    let stream = reflector::reflector(writer, events)
        .touched_objects()
        // The owner references that route the change to its cluster.
        .filter_map(|entry| async move {
            match entry.map(|packed| packed.unpack()) {
                Ok(Ok(object)) => Some(Ok(object)),
                Ok(Err(error)) => {
                    tracing::warn!(%error, "a changed child cannot be routed to its cluster");
                    None
                }
                Err(error) => Some(Err(error)),
            }
        });
    (store, stream)
}

/// The PostgresBackups (created by users, without the cluster label): the
/// cache reconciles read them from, and the stream that routes a change to
/// the cluster the backup names.
fn backups(
    client: &Client,
    namespace: Option<&str>,
) -> (
    Store<PostgresBackup>,
    impl Stream<Item = Result<PostgresBackup, watcher::Error>> + Send + 'static,
) {
    let api = match namespace {
        Some(ns) => Api::<PostgresBackup>::namespaced(client.clone(), ns),
        None => Api::<PostgresBackup>::all(client.clone()),
    };
    let (store, writer) = reflector::store();
    let events = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|backup| backup.metadata.managed_fields = None)
        .reflect(writer)
        .touched_objects();
    (store, events)
}

/// What a change of a cluster must touch to trigger a reconcile: its spec
/// (generation), its annotations (requests such as a switchover or
/// fencing), finalizers and deletion. Status writes, the operator's own
/// included, do not: otherwise each status write (a WAL position moves
/// with every commit) would set off the next reconcile in a tight loop.
/// Children's changes, requeues and the periodic resync still trigger.
fn worth_reconciling(cluster: &CachedCluster) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let meta = cluster.meta();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_nanosecond())
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// Runs the controller until `shutdown` completes; in-flight reconciles
/// finish first.
pub async fn run(
    client: Client,
    config: OperatorConfig,
    metrics: Arc<Metrics>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let ns = options.namespace.as_deref();
    let (pods, pod_events) = child::<Pod>(&client, ns);
    let (volumes, volume_events) = child::<PersistentVolumeClaim>(&client, ns);
    let (secrets, secret_events) = child::<Secret>(&client, ns);
    let (services, service_events) = child::<Service>(&client, ns);
    let (service_accounts, account_events) = child::<ServiceAccount>(&client, ns);
    let (roles, role_events) = child::<Role>(&client, ns);
    let (role_bindings, binding_events) = child::<RoleBinding>(&client, ns);
    let (pdbs, pdb_events) = child::<PodDisruptionBudget>(&client, ns);
    let (network_policies, policy_events) = child::<NetworkPolicy>(&client, ns);
    let stores = Stores {
        pods,
        volumes,
        secrets,
        services,
        service_accounts,
        roles,
        role_bindings,
        pdbs,
        network_policies,
        synced: CacheSync::default(),
    };
    stores.synced.start(&stores);
    let (backups, backup_events) = backups(&client, ns);
    // A cluster object that does not decode (written under another
    // schema, say) is handed to reconcile as such, instead of failing the
    // watch for every cluster; clusters are cached encoded.
    let clusters = match ns {
        Some(ns) => Api::<CachedCluster>::namespaced(client.clone(), ns),
        None => Api::<CachedCluster>::all(client.clone()),
    };
    let ctx = Arc::new(Context::new(
        client.clone(),
        config,
        metrics.clone(),
        stores,
        backups,
    ));
    let quiet_leases = crate::primacy::quiet_leases(&client, ns, ctx.leases.clone());
    let (cluster_store, cluster_writer) = reflector::store();
    let cluster_events = watcher(clusters, watcher::Config::default().any_semantic())
        .default_backoff()
        // Every status write adds to the managedFields; reconcile reads
        // only when the spec last changed.
        .modify(|cluster| crate::report::keep_spec_change_only(cluster.meta_mut()))
        .reflect(cluster_writer)
        .touched_objects()
        .predicate_filter(worth_reconciling, PredicateConfig::default());
    let controller = Controller::for_stream(cluster_events, cluster_store);
    metrics.count_clusters_of(controller.store());
    controller
        .with_config(Config::default().concurrency(options.concurrency))
        .owns_stream(pod_events)
        .owns_stream(volume_events)
        .owns_stream(secret_events)
        .owns_stream(service_events)
        .owns_stream(account_events)
        .owns_stream(role_events)
        .owns_stream(binding_events)
        .owns_stream(pdb_events)
        .owns_stream(policy_events)
        .watches_stream(quiet_leases, |lease| crate::primacy::cluster_of(&lease))
        .watches_stream(backup_events, |backup| crate::backups::cluster_of(&backup))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        })
        .await;
}
