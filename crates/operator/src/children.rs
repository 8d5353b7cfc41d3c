//! Fetch: a cluster's children as they are now, found by the cluster label
//! and deterministic names.
//!
//! Children are read from reflector caches that the controller's own
//! watches keep current, so a reconcile makes no API reads for them (R9:
//! a converged reconcile costs nothing). A watch that has not listed yet
//! makes the reconcile wait (bounded) instead of acting on an empty cache.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, PodCondition, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use tusk_api::labels;

use crate::error::Error;

/// How long a reconcile waits for the caches' first list.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// Caches of every child kind, filled by the controller's watches.
#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Pod>,
    pub volumes: Store<PersistentVolumeClaim>,
    pub secrets: Store<Secret>,
    pub services: Store<Service>,
    pub service_accounts: Store<ServiceAccount>,
    pub roles: Store<Role>,
    pub role_bindings: Store<RoleBinding>,
    pub pdbs: Store<PodDisruptionBudget>,
}

/// Every child of one cluster.
#[derive(Default)]
pub struct Children {
    pub pods: Vec<Pod>,
    pub volumes: Vec<PersistentVolumeClaim>,
    pub secrets: Vec<Secret>,
    pub services: Vec<Service>,
    pub service_accounts: Vec<ServiceAccount>,
    pub roles: Vec<Role>,
    pub role_bindings: Vec<RoleBinding>,
    pub pdbs: Vec<PodDisruptionBudget>,
}

impl Children {
    pub async fn fetch(stores: &Stores, namespace: &str, cluster: &str) -> Result<Self, Error> {
        Ok(Self {
            pods: select(&stores.pods, namespace, cluster).await?,
            // A volume kept by `deletionPolicy: Retain` after its replica was
            // removed is no longer an instance of the cluster.
            volumes: select(&stores.volumes, namespace, cluster)
                .await?
                .into_iter()
                .filter(|v| v.labels().get(labels::RETAINED).map(String::as_str) != Some("true"))
                .collect(),
            secrets: select(&stores.secrets, namespace, cluster).await?,
            services: select(&stores.services, namespace, cluster).await?,
            service_accounts: select(&stores.service_accounts, namespace, cluster).await?,
            roles: select(&stores.roles, namespace, cluster).await?,
            role_bindings: select(&stores.role_bindings, namespace, cluster).await?,
            pdbs: select(&stores.pdbs, namespace, cluster).await?,
        })
    }
}

impl Children {
    /// How many volumes the cluster has (an instance may have a volume and
    /// no pod).
    pub fn volume_count(&self) -> u32 {
        u32::try_from(self.volumes.len()).unwrap_or(u32::MAX)
    }
}

async fn select<K>(store: &Store<K>, namespace: &str, cluster: &str) -> Result<Vec<K>, Error>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    if tokio::time::timeout(CACHE_SYNC_TIMEOUT, store.wait_until_ready())
        .await
        .map(|ready| ready.is_ok())
        != Ok(true)
    {
        return Err(Error::CacheNotReady(K::kind(&()).into_owned()));
    }
    Ok(store
        .state_filter(|object| {
            object.namespace().as_deref() == Some(namespace)
                && object.labels().get(labels::CLUSTER).map(String::as_str) == Some(cluster)
        })
        .into_iter()
        .map(|object: Arc<K>| (*object).clone())
        .collect())
}

/// The object named `name` in `objects`.
pub fn named<'a, K: ResourceExt>(objects: &'a [K], name: &str) -> Option<&'a K> {
    objects.iter().find(|o| o.name_any() == name)
}

/// Whether the kubelet reports the pod Ready.
pub fn pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// When the kubelet last turned the pod's Ready condition False, while it
/// is False: the moment its readiness probe declared it failed.
pub fn not_ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .filter(|c| c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
}
