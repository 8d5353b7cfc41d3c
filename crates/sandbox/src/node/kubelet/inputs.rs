//! What a pod refers to by name (Secrets, ConfigMaps, claims), read from the
//! API before its containers start; Secrets and ConfigMaps are read again
//! while it runs, to refresh its volumes.
//!
//! Keeping the reads apart from the volume and env logic lets those be
//! tested without a server, and makes "the Secret is missing" one error
//! that leaves the container waiting, as on Kubernetes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::{Api, Client};

use super::identity::{KubernetesService, Token, request_token};
use super::input_error::InputError;

/// The objects a pod refers to, by name, as bytes.
#[derive(Clone, Debug, Default)]
pub struct PodInputs {
    pub secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// Claim name to the host directory of its bound volume.
    pub claims: BTreeMap<String, PathBuf>,
    /// The `kubernetes` Service, for the variables every container gets.
    pub kubernetes: Option<KubernetesService>,
    /// Tokens of `serviceAccountToken` projections, by volume name and
    /// path.
    pub tokens: BTreeMap<(String, String), Token>,
}

impl PodInputs {
    pub fn secret(
        &self,
        name: &str,
        optional: bool,
    ) -> Result<BTreeMap<String, Vec<u8>>, InputError> {
        match self.secrets.get(name) {
            Some(data) => Ok(data.clone()),
            None if optional => Ok(BTreeMap::new()),
            None => Err(InputError::SecretNotFound(name.to_owned())),
        }
    }

    pub fn config_map(
        &self,
        name: &str,
        optional: bool,
    ) -> Result<BTreeMap<String, Vec<u8>>, InputError> {
        match self.config_maps.get(name) {
            Some(data) => Ok(data.clone()),
            None if optional => Ok(BTreeMap::new()),
            None => Err(InputError::ConfigMapNotFound(name.to_owned())),
        }
    }

    /// The `kubernetes` Service's variables (none before it exists).
    pub fn service_env(&self) -> Vec<(String, String)> {
        self.kubernetes
            .as_ref()
            .map(KubernetesService::env)
            .unwrap_or_default()
    }

    pub fn claim_dir(&self, name: &str) -> Result<PathBuf, InputError> {
        self.claims
            .get(name)
            .cloned()
            .ok_or_else(|| InputError::ClaimNotBound(name.to_owned()))
    }

    /// Reads the Secrets and ConfigMaps `pod` refers to (absent ones are
    /// left out): what its volumes and environment are made of, and what a
    /// refresh of its volumes reads again.
    pub async fn fetch_data(client: &Client, pod: &Pod) -> Result<Self, InputError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let (secrets, config_maps, _) = referenced(pod);
        let mut inputs = Self::default();
        let secret_api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        for name in secrets {
            if let Some(secret) = secret_api.get_opt(&name).await? {
                let mut data: BTreeMap<String, Vec<u8>> = secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                for (k, v) in secret.string_data.unwrap_or_default() {
                    data.insert(k, v.into_bytes());
                }
                inputs.secrets.insert(name, data);
            }
        }
        let config_map_api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        for name in config_maps {
            if let Some(config_map) = config_map_api.get_opt(&name).await? {
                let mut data: BTreeMap<String, Vec<u8>> = config_map
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                for (k, v) in config_map.binary_data.unwrap_or_default() {
                    data.insert(k, v.0);
                }
                inputs.config_maps.insert(name, data);
            }
        }
        Ok(inputs)
    }

    /// Reads everything `pod` refers to. Absent objects are simply left
    /// out; whether that is an error depends on `optional` where used.
    pub async fn fetch(
        client: &Client,
        pod: &Pod,
        volume_dir: impl Fn(&str) -> PathBuf,
    ) -> Result<Self, InputError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let (_, _, claims) = referenced(pod);
        let mut inputs = Self::fetch_data(client, pod).await?;
        let claim_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        for name in claims {
            let bound = claim_api.get_opt(&name).await?.and_then(|claim| {
                let phase = claim.status.as_ref().and_then(|s| s.phase.clone());
                let volume = claim.spec.and_then(|s| s.volume_name)?;
                (phase.as_deref() == Some("Bound")).then_some(volume)
            });
            if let Some(volume) = bound {
                inputs.claims.insert(name, volume_dir(&volume));
            }
        }
        inputs.kubernetes = KubernetesService::fetch(client).await?;
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let sources = volume
                .projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten());
            for projection in sources.filter_map(|s| s.service_account_token.as_ref()) {
                let token = request_token(client, pod, projection).await?;
                let key = (volume.name.clone(), projection.path.clone());
                inputs.tokens.insert(key, token);
            }
        }
        Ok(inputs)
    }
}

/// Names of the Secrets, ConfigMaps and claims a pod refers to.
fn referenced(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let mut secrets = BTreeSet::new();
    let mut config_maps = BTreeSet::new();
    let mut claims = BTreeSet::new();
    let Some(spec) = &pod.spec else {
        return (secrets, config_maps, claims);
    };
    for volume in spec.volumes.iter().flatten() {
        if let Some(name) = volume.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.insert(name);
        }
        if let Some(config_map) = &volume.config_map {
            config_maps.insert(config_map.name.clone());
        }
        for source in volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
        {
            if let Some(secret) = &source.secret {
                secrets.insert(secret.name.clone());
            }
            if let Some(config_map) = &source.config_map {
                config_maps.insert(config_map.name.clone());
            }
        }
        if let Some(claim) = &volume.persistent_volume_claim {
            claims.insert(claim.claim_name.clone());
        }
    }
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for container in containers {
        for env in container.env.iter().flatten() {
            let Some(from) = &env.value_from else {
                continue;
            };
            if let Some(key) = &from.secret_key_ref {
                secrets.insert(key.name.clone());
            }
            if let Some(key) = &from.config_map_key_ref {
                config_maps.insert(key.name.clone());
            }
        }
        for from in container.env_from.iter().flatten() {
            if let Some(secret) = &from.secret_ref {
                secrets.insert(secret.name.clone());
            }
            if let Some(config_map) = &from.config_map_ref {
                config_maps.insert(config_map.name.clone());
            }
        }
    }
    (secrets, config_maps, claims)
}
