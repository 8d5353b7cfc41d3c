//! Fetch: a cluster's children as they are now, found by the cluster label
//! and deterministic names.
//!
//! Children are read from reflector caches that the controller's own
//! watches keep current, so a reconcile makes no API reads for them (R9:
//! a converged reconcile costs nothing). A watch that has not listed yet
//! makes the reconcile wait (bounded) instead of acting on an empty cache.
//!
//! The caches hold only what a reconcile reads ([`Trim`]): with a thousand
//! clusters, whole pods and claims were most of the operator's memory. They
//! hold it encoded ([`Packed`]); a reconcile decodes its own cluster's
//! children.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    HTTPGetAction, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, PodCondition, PodSpec,
    PodStatus, Probe, Secret, Service, ServiceAccount, Volume, VolumeResourceRequirements,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresCluster;

use crate::error::Error;
use crate::packed::Packed;

mod live;

/// How long a reconcile waits for the caches' first list.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// Caches of every child kind, filled by the controller's watches.
#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Packed<Pod>>,
    pub volumes: Store<Packed<PersistentVolumeClaim>>,
    pub secrets: Store<Packed<Secret>>,
    pub services: Store<Packed<Service>>,
    pub service_accounts: Store<Packed<ServiceAccount>>,
    pub roles: Store<Packed<Role>>,
    pub role_bindings: Store<Packed<RoleBinding>>,
    pub pdbs: Store<Packed<PodDisruptionBudget>>,
    pub network_policies: Store<Packed<NetworkPolicy>>,
    /// Whether every cache above has listed once.
    pub synced: CacheSync,
}

/// Whether the child caches have listed once, for any number of waiting
/// reconciles. One task waits on the caches themselves and tells every
/// reconcile through a watch channel: a cache's own readiness future
/// (kube-runtime's `DelayedInit`) keeps a single waker, so of several
/// reconciles waiting on it at start only the last was woken, and the
/// others waited out the full timeout (30 s for a cluster whose first
/// reconcile came early).
#[derive(Clone, Debug)]
pub struct CacheSync(Arc<watch::Sender<Option<&'static str>>>);

impl Default for CacheSync {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(Some("every child"))))
    }
}

impl CacheSync {
    /// Starts the task that waits for `stores`' first lists, one cache
    /// after the other (each with this task as its only waiter).
    pub fn start(&self, stores: &Stores) {
        let (sync, stores) = (self.0.clone(), stores.clone());
        tokio::spawn(async move {
            let listed = listed(&sync, &stores.pods).await
                && listed(&sync, &stores.volumes).await
                && listed(&sync, &stores.secrets).await
                && listed(&sync, &stores.services).await
                && listed(&sync, &stores.service_accounts).await
                && listed(&sync, &stores.roles).await
                && listed(&sync, &stores.role_bindings).await
                && listed(&sync, &stores.pdbs).await
                && listed(&sync, &stores.network_policies).await;
            if listed {
                sync.send_replace(None);
            }
        });
    }

    /// Waits (at most `limit`) until every cache has listed; the kind of
    /// a cache that has not.
    async fn wait(&self, limit: Duration) -> Result<(), &'static str> {
        let mut synced = self.0.subscribe();
        let listed = tokio::time::timeout(limit, synced.wait_for(Option::is_none))
            .await
            .is_ok_and(|seen| seen.is_ok());
        if listed {
            return Ok(());
        }
        Err((*synced.borrow()).unwrap_or("every child"))
    }
}

/// Waits for `store`'s first list, saying which cache is awaited; false
/// when its watch ended first.
async fn listed<K>(sync: &watch::Sender<Option<&'static str>>, store: &Store<Packed<K>>) -> bool
where
    K: Resource<DynamicType = ()>,
{
    let kind = match K::kind(&()) {
        std::borrow::Cow::Borrowed(kind) => kind,
        std::borrow::Cow::Owned(_) => "child",
    };
    sync.send_replace(Some(kind));
    store.wait_until_ready().await.is_ok()
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
    pub network_policies: Vec<NetworkPolicy>,
}

impl Children {
    pub async fn fetch(stores: &Stores, cluster: &PostgresCluster) -> Result<Self, Error> {
        let namespace = cluster.namespace().unwrap_or_default();
        let namespace = namespace.as_str();
        let uid = cluster.uid().unwrap_or_default();
        let name = cluster.name_any();
        let cluster = name.as_str();
        stores
            .synced
            .wait(CACHE_SYNC_TIMEOUT)
            .await
            .map_err(|kind| Error::CacheNotReady(kind.to_owned()))?;
        Ok(Self {
            // Pods with the cluster's labels that it does not own (a debug
            // pod with copied labels) are no instances of it.
            pods: select(&stores.pods, namespace, cluster)?
                .into_iter()
                .filter(|pod| pod_belongs(pod, &uid))
                .collect(),
            // Claims with the cluster's name label that were not made for
            // it are never used nor changed.
            volumes: select(&stores.volumes, namespace, cluster)?
                .into_iter()
                .filter(|volume| volume_belongs(volume, &uid))
                .collect(),
            secrets: select(&stores.secrets, namespace, cluster)?,
            services: select(&stores.services, namespace, cluster)?,
            service_accounts: select(&stores.service_accounts, namespace, cluster)?,
            roles: select(&stores.roles, namespace, cluster)?,
            role_bindings: select(&stores.role_bindings, namespace, cluster)?,
            pdbs: select(&stores.pdbs, namespace, cluster)?,
            network_policies: select(&stores.network_policies, namespace, cluster)?,
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

/// Whether `volume` is an instance volume of the cluster with `uid`: made
/// for it (its uid label, or for claims made before that label, its owner
/// reference) and not retained (a volume kept by `deletionPolicy: Retain`
/// after its replica was removed is no longer an instance of the cluster).
pub fn volume_belongs(volume: &PersistentVolumeClaim, uid: &str) -> bool {
    let retained = volume.labels().get(labels::RETAINED).map(String::as_str) == Some("true");
    let made_for = match volume.labels().get(labels::CLUSTER_UID) {
        Some(label) => label == uid,
        None => volume.owner_references().iter().any(|o| o.uid == uid),
    };
    !uid.is_empty() && made_for && !retained
}

/// Whether `pod` is one the cluster with `uid` made: it names the cluster
/// as its owner. Labels alone are anyone's to copy.
pub fn pod_belongs(pod: &Pod, uid: &str) -> bool {
    !uid.is_empty() && pod.owner_references().iter().any(|o| o.uid == uid)
}

fn select<K>(store: &Store<Packed<K>>, namespace: &str, cluster: &str) -> Result<Vec<K>, Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + 'static,
{
    store
        .state_filter(|entry| entry.belongs_to(namespace, cluster))
        .iter()
        .map(|entry| entry.unpack())
        .collect()
}

/// Cuts a watched child down to what reconciles read before it enters the
/// cache. Of metadata, what reconciles and the controller read stays:
/// owner references map events to clusters, labels and names select
/// children and are compared with the desired ones, annotations are kept
/// for the same comparison, and deletion timestamps mark pods on their way
/// out.
pub trait Trim {
    fn trim(&mut self);
}

/// Drops the metadata no reconcile reads from a child: managedFields, and
/// the uid, resourceVersion, creation time and generation (children are
/// applied by name without preconditions, and the desired objects set none
/// of them, so the drift comparison never looks at them).
fn trim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.uid = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.generation = None;
}

/// Pods are created once and never compared with a desired pod, so their
/// spec is not kept; of their status, what readiness, polling and the
/// status's waiting reasons read, and of a pod not yet on a node, its age
/// and the scheduler's words ([`crate::scheduling`]).
impl Trim for Pod {
    fn trim(&mut self) {
        // Until the pod is on a node, its age says whether a scheduler
        // should have looked at it by now.
        let created = self.metadata.creation_timestamp.take();
        // Its uid makes a deletion a precondition on this very pod.
        let uid = self.metadata.uid.take();
        trim_meta(&mut self.metadata);
        self.metadata.uid = uid;
        if !crate::scheduling::placed(self) {
            self.metadata.creation_timestamp = created;
        }
        // Of the spec, only what says how the instance API is served (the
        // probes' scheme, see `instance_api::served_over_https`) and which
        // key its tokens are checked against (the token key's volume, by
        // name, see `instance_api::mounts_token_key`).
        let token_volume = tusk_api::contract::TlsSecret::TokenPublicKey.mount_name();
        self.spec = self.spec.take().map(|spec| PodSpec {
            volumes: spec.volumes.map(|volumes| {
                volumes
                    .into_iter()
                    .filter(|v| Some(v.name.as_str()) == token_volume)
                    .map(|v| Volume {
                        name: v.name,
                        ..Volume::default()
                    })
                    .collect()
            }),
            containers: spec
                .containers
                .into_iter()
                .filter(|c| c.name == "postgres")
                .map(|c| Container {
                    name: c.name,
                    readiness_probe: c.readiness_probe.map(|probe| Probe {
                        http_get: probe.http_get.map(|get| HTTPGetAction {
                            scheme: get.scheme,
                            ..HTTPGetAction::default()
                        }),
                        ..Probe::default()
                    }),
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        });
        self.status = self.status.take().map(|status| PodStatus {
            conditions: status.conditions.map(|conditions| {
                conditions
                    .into_iter()
                    .filter(|c| c.type_ == "Ready" || c.type_ == crate::scheduling::POD_SCHEDULED)
                    .map(|c| PodCondition {
                        // The scheduler's words, while it finds no node.
                        message: c
                            .message
                            .filter(|_| c.status == "False" && c.type_ != "Ready"),
                        reason: c
                            .reason
                            .filter(|_| c.status == "False" && c.type_ != "Ready"),
                        last_probe_time: None,
                        ..c
                    })
                    .collect()
            }),
            pod_ip: status.pod_ip,
            init_container_statuses: status.init_container_statuses.map(trim_containers),
            container_statuses: status.container_statuses.map(trim_containers),
            ..PodStatus::default()
        });
    }
}

fn trim_containers(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    statuses
        .into_iter()
        .map(|c| ContainerStatus {
            name: c.name,
            ready: c.ready,
            restart_count: c.restart_count,
            state: c.state.map(|state| ContainerState {
                waiting: state.waiting.map(|w| ContainerStateWaiting {
                    reason: w.reason,
                    message: w.message,
                }),
                terminated: state.terminated.map(|t| ContainerStateTerminated {
                    exit_code: t.exit_code,
                    reason: t.reason,
                    message: t.message,
                    ..ContainerStateTerminated::default()
                }),
                running: None,
            }),
            ..ContainerStatus::default()
        })
        .collect()
}

/// Of a claim, only the requested size (storage growth compares it).
impl Trim for PersistentVolumeClaim {
    fn trim(&mut self) {
        // Its uid makes a deletion a precondition on this very claim.
        let uid = self.metadata.uid.take();
        trim_meta(&mut self.metadata);
        self.metadata.uid = uid;
        self.status = None;
        self.spec = self.spec.take().map(|spec| PersistentVolumeClaimSpec {
            resources: spec.resources.map(|r| VolumeResourceRequirements {
                requests: r.requests,
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        });
    }
}

/// Secrets are created once and never read back: their existence (and
/// the annotations saying which authority issued a certificate, and when
/// it is due) is all a reconcile needs, and the passwords stay out of the
/// operator's memory. The exceptions are the cluster's certificate
/// authority (`<cluster>-ca-key`), whose key issues and renews the
/// cluster's certificates, the key that signs the instance API's tokens
/// (`<cluster>-api-token-key`), and its public half's copy
/// (`<cluster>-api-token-pub`, compared with it).
impl Trim for Secret {
    fn trim(&mut self) {
        use tusk_api::contract::TlsSecret;
        let kept = self
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(labels::CLUSTER))
            .is_some_and(|cluster| {
                [
                    TlsSecret::CaKey,
                    TlsSecret::TokenKey,
                    TlsSecret::TokenPublicKey,
                ]
                .iter()
                .any(|which| {
                    self.metadata.name.as_deref()
                        == Some(which.secret_name(cluster.as_str()).as_str())
                })
            });
        trim_meta(&mut self.metadata);
        if !kept {
            self.data = None;
        }
        self.string_data = None;
    }
}

/// Children compared field by field with the desired object (R14: drift
/// in what the operator sets is reverted) keep their content; they are a
/// few hundred bytes each. Status is never compared.
impl Trim for ServiceAccount {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Trim for Role {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Trim for RoleBinding {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Trim for Service {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for PodDisruptionBudget {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for NetworkPolicy {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reconciles that wait for the caches together are all let through
    /// when the last cache lists (a cache's own readiness wakes only one).
    #[tokio::test]
    async fn every_waiting_reconcile_goes_on_once_the_caches_listed() {
        use kube::runtime::{reflector, watcher};
        let (pods, mut pod_writer) = reflector::store();
        let (volumes, mut volume_writer) = reflector::store();
        let (secrets, mut secret_writer) = reflector::store();
        let (services, mut service_writer) = reflector::store();
        let (service_accounts, mut account_writer) = reflector::store();
        let (roles, mut role_writer) = reflector::store();
        let (role_bindings, mut binding_writer) = reflector::store();
        let (pdbs, mut pdb_writer) = reflector::store();
        let (network_policies, mut policy_writer) = reflector::store();
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
        let waiting: Vec<_> = (0..3)
            .map(|_| {
                let synced = stores.synced.clone();
                tokio::spawn(async move { synced.wait(Duration::from_secs(3600)).await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(
            stores.synced.wait(Duration::from_millis(10)).await,
            Err("Pod"),
            "the first cache not listed is named"
        );
        pod_writer.apply_watcher_event(&watcher::Event::InitDone);
        volume_writer.apply_watcher_event(&watcher::Event::InitDone);
        secret_writer.apply_watcher_event(&watcher::Event::InitDone);
        service_writer.apply_watcher_event(&watcher::Event::InitDone);
        account_writer.apply_watcher_event(&watcher::Event::InitDone);
        role_writer.apply_watcher_event(&watcher::Event::InitDone);
        binding_writer.apply_watcher_event(&watcher::Event::InitDone);
        pdb_writer.apply_watcher_event(&watcher::Event::InitDone);
        policy_writer.apply_watcher_event(&watcher::Event::InitDone);
        for waiter in waiting {
            let done = tokio::time::timeout(Duration::from_secs(10), waiter).await;
            assert_eq!(
                done.expect("every waiter is woken").expect("joined"),
                Ok(())
            );
        }
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "db-1", "labels": {"tusk.dev/cluster": "db"},
                "ownerReferences": [{"apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                                     "name": "db", "uid": "u1", "controller": true}],
                "managedFields": [{"manager": "tusk-operator", "operation": "Apply"}]
            },
            "spec": {"containers": [{"name": "postgres", "image": "postgres:17",
                "env": [{"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"}],
                "readinessProbe": {"periodSeconds": 1, "httpGet": {
                    "path": "/readyz", "port": "http", "scheme": "HTTPS"}}}],
                "volumes": [{"name": "pgdata", "persistentVolumeClaim": {"claimName": "db-1"}},
                            {"name": "api-token", "secret": {"secretName": "db-api-token-pub"}}]},
            "status": {
                "podIP": "10.0.0.7",
                "conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                    {"type": "PodScheduled", "status": "True"}
                ],
                "containerStatuses": [{
                    "name": "postgres", "image": "postgres:17", "imageID": "sha256:1", "ready": false,
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
                }]
            }
        }))
        .expect("pod")
    }

    #[test]
    fn a_trimmed_pod_keeps_what_reconciles_read() {
        let mut trimmed = pod();
        trimmed.trim();
        // Of the spec, how the instance API is served and which key
        // checks its tokens, and nothing else.
        assert!(crate::instance_api::served_over_https(&trimmed));
        assert!(crate::instance_api::mounts_token_key(&trimmed));
        let spec = trimmed.spec.clone().expect("spec");
        assert_eq!(
            serde_json::to_value(&spec).expect("json"),
            json!({"containers": [{"name": "postgres",
                "readinessProbe": {"httpGet": {"port": 0, "scheme": "HTTPS"}}}],
                "volumes": [{"name": "api-token"}]})
        );
        assert!(trimmed.metadata.managed_fields.is_none());
        assert_eq!(trimmed.owner_references(), pod().owner_references());
        assert_eq!(trimmed.labels(), pod().labels());
        assert!(!pod_ready(&trimmed));
        assert_eq!(not_ready_since(&trimmed), not_ready_since(&pod()));
        let status = trimmed.status.expect("status");
        assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
        assert_eq!(status.conditions.map(|c| c.len()), Some(2));
        assert!(trimmed.metadata.creation_timestamp.is_none(), "on a node");
        let container = &status.container_statuses.expect("containers")[0];
        assert_eq!(container.image, "");
        let waiting = container
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .expect("waiting");
        assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(waiting.message.as_deref(), Some("back-off"));
    }

    #[test]
    fn a_trimmed_pod_waiting_for_a_node_keeps_its_age_and_the_schedulers_words() {
        let mut waiting: Pod = serde_json::from_value(json!({
            "metadata": {"name": "db-1", "creationTimestamp": "2026-12-01T10:00:00Z"},
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/0 nodes are available", "lastTransitionTime": "2026-12-01T10:00:01Z",
            }]}
        }))
        .expect("pod");
        let now = "2026-12-01T10:00:05Z".parse().expect("a time");
        let before = crate::scheduling::unscheduled(&waiting, now);
        assert!(before.is_some());
        waiting.trim();
        assert_eq!(crate::scheduling::unscheduled(&waiting, now), before);
        assert!(waiting.metadata.creation_timestamp.is_some());
    }

    #[test]
    fn trimmed_metadata_keeps_what_selects_routes_and_compares_children() {
        let mut role: Role = serde_json::from_value(json!({
            "metadata": {
                "name": "db-instance", "namespace": "shop", "uid": "u9", "resourceVersion": "41",
                "generation": 2, "creationTimestamp": "2026-12-01T10:00:00Z",
                "deletionTimestamp": "2026-12-01T11:00:00Z",
                "labels": {"tusk.dev/cluster": "db"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                                     "name": "db", "uid": "u1", "controller": true}],
                "managedFields": [{"manager": "tusk-operator", "operation": "Apply"}]
            },
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        }))
        .expect("role");
        let whole = role.clone();
        role.trim();
        let meta = &role.metadata;
        assert!(meta.uid.is_none() && meta.resource_version.is_none());
        assert!(meta.creation_timestamp.is_none() && meta.generation.is_none());
        assert!(meta.managed_fields.is_none());
        assert_eq!(meta.name, whole.metadata.name);
        assert_eq!(meta.namespace, whole.metadata.namespace);
        assert_eq!(meta.labels, whole.metadata.labels);
        assert_eq!(meta.annotations, whole.metadata.annotations);
        assert_eq!(meta.owner_references, whole.metadata.owner_references);
        assert_eq!(meta.deletion_timestamp, whole.metadata.deletion_timestamp);
        assert_eq!(role.rules, whole.rules);
    }

    #[test]
    fn a_trimmed_claim_keeps_its_requested_size() {
        let mut claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "db-1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}
        }))
        .expect("claim");
        claim.trim();
        assert!(claim.status.is_none());
        let spec = claim.spec.expect("spec");
        assert!(spec.access_modes.is_none());
        let requests = spec.resources.and_then(|r| r.requests).expect("requests");
        assert_eq!(requests.get("storage").map(|q| q.0.as_str()), Some("1Gi"));
    }

    #[test]
    fn a_cached_secret_holds_no_password() {
        let mut secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "db-superuser"},
            "stringData": {"password": "p"},
            "data": {"password": "cA=="}
        }))
        .expect("secret");
        secret.trim();
        assert!(secret.data.is_none() && secret.string_data.is_none());
        assert_eq!(secret.name_any(), "db-superuser");
    }
}
