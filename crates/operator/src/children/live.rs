//! A cluster's children read from the API server instead of the caches,
//! for `tusk plan`, which has none: cut down as the caches cut them
//! ([`Trim`]), so the planner sees what it sees in the operator.

use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresCluster;

use super::{Children, Trim, pod_belongs, volume_belongs};
use crate::error::Error;

impl Children {
    /// The cluster's children, listed by its label.
    pub async fn list(client: &kube::Client, cluster: &PostgresCluster) -> Result<Self, Error> {
        let namespace = cluster.namespace().unwrap_or_default();
        let uid = cluster.uid().unwrap_or_default();
        let selector = format!("{}={}", labels::CLUSTER, cluster.name_any());
        let list = ListOf {
            client,
            namespace: &namespace,
            params: kube::api::ListParams::default().labels(&selector),
        };
        Ok(Self {
            pods: list
                .of()
                .await?
                .into_iter()
                .filter(|pod| pod_belongs(pod, &uid))
                .collect(),
            volumes: list
                .of()
                .await?
                .into_iter()
                .filter(|volume| volume_belongs(volume, &uid))
                .collect(),
            secrets: list.secrets().await?,
            services: list.of().await?,
            service_accounts: list.of().await?,
            roles: list.of().await?,
            role_bindings: list.of().await?,
            pdbs: list.of().await?,
            network_policies: list.of().await?,
        })
    }
}

/// Lists of one cluster's children, by its label.
struct ListOf<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
    params: kube::api::ListParams,
}

impl ListOf<'_> {
    async fn of<K>(&self) -> Result<Vec<K>, Error>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Trim
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let api: kube::Api<K> = kube::Api::namespaced(self.client.clone(), self.namespace);
        let listed = api
            .list(&self.params)
            .await
            .map_err(Error::kube(format!("list {}s", K::kind(&()))))?;
        Ok(listed
            .items
            .into_iter()
            .map(|mut object| {
                object.trim();
                object
            })
            .collect())
    }

    /// Secrets by their metadata alone: their values never leave the API
    /// server (a reconcile reads only that they exist, and whose they are).
    async fn secrets(&self) -> Result<Vec<Secret>, Error> {
        let api: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), self.namespace);
        let listed = api
            .list_metadata(&self.params)
            .await
            .map_err(Error::kube("list Secrets"))?;
        Ok(listed
            .items
            .into_iter()
            .map(|partial| {
                let mut secret = Secret {
                    metadata: partial.metadata,
                    ..Secret::default()
                };
                secret.trim();
                secret
            })
            .collect())
    }
}
