//! The controller's cache of clusters: each cluster's metadata decoded
//! (the controller keys, routes and filters on it), the rest kept as JSON
//! and decoded for the cluster's reconcile and at each metrics scrape.
//!
//! A decoded `PostgresCluster` is about 2 KiB of struct before any string
//! (every optional part of the spec and status is inline); its JSON is
//! smaller and one allocation. Reconciles already worked on a copy of the
//! cached cluster, so decoding replaces that copy. See [`crate::packed`]
//! for the children.
//!
//! A cluster that does not decode under this operator's types is kept as
//! its metadata and the decoding error, as [`DeserializeGuard`] keeps it,
//! so reconcile can say so on the object.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use serde::{Deserialize, Deserializer};
use tusk_api::v1alpha1::PostgresCluster;

use crate::packed::Encoded;

/// One cached cluster.
#[derive(Clone, Debug)]
pub struct CachedCluster {
    metadata: ObjectMeta,
    /// The object with empty metadata, as JSON (compressed, see
    /// [`crate::packed`]); or why it did not decode.
    body: Result<Encoded, String>,
}

impl CachedCluster {
    /// Encodes a watched cluster.
    pub fn pack(guard: DeserializeGuard<PostgresCluster>) -> Self {
        match guard.0 {
            Ok(mut cluster) => {
                let metadata = std::mem::take(&mut cluster.metadata);
                let body = serde_json::to_vec(&cluster)
                    .map(Encoded::new)
                    .map_err(|e| format!("cannot encode the cached cluster: {e}"));
                Self { metadata, body }
            }
            Err(invalid) => Self {
                metadata: invalid.metadata,
                body: Err(invalid.error),
            },
        }
    }

    /// The cluster as it was watched.
    pub fn unpack(&self) -> DeserializeGuard<PostgresCluster> {
        let decoded = match &self.body {
            Ok(encoded) => encoded.json().and_then(|json| {
                serde_json::from_slice::<PostgresCluster>(&json).map_err(|e| e.to_string())
            }),
            Err(error) => Err(error.clone()),
        };
        DeserializeGuard(
            decoded
                .map(|mut cluster| {
                    cluster.metadata = self.metadata.clone();
                    cluster
                })
                .map_err(|error| InvalidObject {
                    error,
                    metadata: self.metadata.clone(),
                }),
        )
    }
}

/// Decodes as [`DeserializeGuard`] does, then encodes.
impl<'de> Deserialize<'de> for CachedCluster {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DeserializeGuard::<PostgresCluster>::deserialize(deserializer).map(Self::pack)
    }
}

/// The same resource as `PostgresCluster`: owner references of children
/// name that kind, and the controller matches them against this one.
impl Resource for CachedCluster {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        PostgresCluster::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        PostgresCluster::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        PostgresCluster::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        PostgresCluster::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster_json() -> serde_json::Value {
        json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "db", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                         "generation": 3, "annotations": {"postgres.tusk.dev/promote": "db-2"},
                         "finalizers": ["postgres.tusk.dev/cleanup"]},
            "spec": {"instances": 3, "postgres": {"version": 15, "parameters": {"work_mem": "8MB"}},
                     "storage": {"size": "1Gi"}, "failover": {"delaySeconds": 5}},
            "status": {"phase": "Ready", "observedGeneration": 3, "targetPrimary": "db-1",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                       "message": "all ready", "lastTransitionTime": "2026-12-01T10:00:00Z"}]}
        })
    }

    #[test]
    fn an_unpacked_cluster_is_the_watched_one() {
        let watched: PostgresCluster = serde_json::from_value(cluster_json()).expect("cluster");
        let cached: CachedCluster = serde_json::from_value(cluster_json()).expect("cached");
        assert_eq!(cached.meta(), &watched.metadata);
        assert_eq!(cached.unpack().0.expect("decodes"), watched);
    }

    #[test]
    fn an_undecodable_cluster_keeps_its_metadata_and_error() {
        let mut value = cluster_json();
        value["spec"]["instances"] = json!("three");
        let cached: CachedCluster = serde_json::from_value(value).expect("cached");
        assert_eq!(cached.meta().name.as_deref(), Some("db"));
        let invalid = cached.unpack().0.expect_err("invalid");
        assert!(invalid.error.contains("three"), "{}", invalid.error);
        assert_eq!(invalid.metadata.uid.as_deref(), Some("u1"));
    }

    #[test]
    fn it_is_the_postgres_cluster_resource() {
        assert_eq!(CachedCluster::kind(&()), PostgresCluster::kind(&()));
        assert_eq!(
            CachedCluster::api_version(&()),
            PostgresCluster::api_version(&())
        );
        assert_eq!(CachedCluster::plural(&()), PostgresCluster::plural(&()));
    }
}
