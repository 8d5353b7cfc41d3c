//! Fetch: a cluster's children as they are now, found by the cluster label
//! and deterministic names.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tusk_api::labels;

use crate::error::Error;

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
    pub async fn fetch(client: &Client, namespace: &str, cluster: &str) -> Result<Self, Error> {
        let selector = ListParams::default().labels(&format!("{}={cluster}", labels::CLUSTER));
        Ok(Self {
            pods: list(client, namespace, &selector).await?,
            volumes: list(client, namespace, &selector).await?,
            secrets: list(client, namespace, &selector).await?,
            services: list(client, namespace, &selector).await?,
            service_accounts: list(client, namespace, &selector).await?,
            roles: list(client, namespace, &selector).await?,
            role_bindings: list(client, namespace, &selector).await?,
            pdbs: list(client, namespace, &selector).await?,
        })
    }
}

async fn list<K>(client: &Client, namespace: &str, params: &ListParams) -> Result<Vec<K>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    Ok(api
        .list(params)
        .await
        .map_err(Error::kube(format!("list {kind}")))?
        .items)
}

/// The object named `name` in `objects`.
pub fn named<'a, K: ResourceExt>(objects: &'a [K], name: &str) -> Option<&'a K> {
    objects.iter().find(|o| o.name_any() == name)
}
