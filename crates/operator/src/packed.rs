//! Compact cache entries: a watched child is kept as the JSON of its
//! trimmed form, with only its name, namespace and cluster label beside
//! it, and decoded when a reconcile reads it.
//!
//! A decoded Kubernetes object is mostly room for fields it does not have
//! (a `Pod` is more than 2 KiB before any of its strings, most of it empty
//! `Option`s) and one allocation per string and per map: with a thousand
//! clusters of a dozen children each, the caches' structs were most of the
//! operator's memory. The JSON of the same trimmed object is a third of
//! that, in one allocation. A reconcile decodes only its own cluster's
//! children (a dozen small objects), and a converged reconcile still makes
//! no API request.
//!
//! The JSON is kept compressed with zstd against a dictionary of what
//! cached objects look like ([`dictionary`]): about an eighth of its size,
//! decompressed in microseconds when a reconcile decodes it.
//!
//! What goes in is exactly what comes out: `unpack` returns the object
//! `pack` was given (serde round trip of the k8s-openapi types, with the
//! namespace and name, kept beside the JSON, put back).

use std::borrow::Cow;
use std::marker::PhantomData;

use kube::Resource;
use kube::runtime::reflector::Lookup;
use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tusk_api::labels;

use crate::error::Error;

mod dictionary;

/// One cached object of kind `K`, encoded.
pub struct Packed<K> {
    /// The namespace, the name and the cluster label's value, one after
    /// the other: one allocation for the three. The JSON holds neither
    /// namespace nor name.
    names: Box<str>,
    /// Where the name and the cluster label's value start in `names`.
    name_at: u32,
    cluster_at: u32,
    /// Which of [`NAMESPACE`], [`NAME`] and [`CLUSTER`] the object has.
    has: u8,
    json: Encoded,
    kind: PhantomData<fn() -> K>,
}

const NAMESPACE: u8 = 1;
const NAME: u8 = 2;
const CLUSTER: u8 = 4;

impl<K> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Self {
            names: self.names.clone(),
            json: self.json.clone(),
            kind: PhantomData,
            ..*self
        }
    }
}

impl<K> Packed<K>
where
    K: Resource + Serialize + DeserializeOwned,
{
    /// Encodes `object`. Serializing a k8s-openapi object cannot fail (its
    /// maps have string keys); if it ever did, the entry would be empty and
    /// its `unpack` would report the kind and name.
    pub fn pack(mut object: K) -> Self {
        let meta = object.meta_mut();
        let namespace = meta.namespace.take();
        let name = meta.name.take();
        let cluster = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::CLUSTER))
            .cloned();
        let json = serde_json::to_vec(&object).unwrap_or_else(|error| {
            tracing::warn!(%error, ?name, "cannot encode a cached object");
            Vec::new()
        });
        let mut names = String::new();
        names.push_str(namespace.as_deref().unwrap_or_default());
        let name_at = offset(&names);
        names.push_str(name.as_deref().unwrap_or_default());
        let cluster_at = offset(&names);
        names.push_str(cluster.as_deref().unwrap_or_default());
        let flag = |present: bool, flag: u8| if present { flag } else { 0 };
        Self {
            names: names.into_boxed_str(),
            name_at,
            cluster_at,
            has: flag(namespace.is_some(), NAMESPACE)
                | flag(name.is_some(), NAME)
                | flag(cluster.is_some(), CLUSTER),
            json: Encoded::new(json),
            kind: PhantomData,
        }
    }

    /// The object as it was packed.
    pub fn unpack(&self) -> Result<K, Error>
    where
        K::DynamicType: Default,
    {
        let decoded = self
            .json
            .json()
            .and_then(|json| serde_json::from_slice(&json).map_err(|e| e.to_string()));
        let mut object: K = decoded.map_err(|error| {
            Error::CacheEntry(format!(
                "{} {}: {error}",
                K::kind(&K::DynamicType::default()),
                self.name_str().unwrap_or_default()
            ))
        })?;
        let meta = object.meta_mut();
        meta.namespace = self.namespace_str().map(str::to_owned);
        meta.name = self.name_str().map(str::to_owned);
        Ok(object)
    }
}

/// Names are at most 253 bytes; a longer text could only make the lookup
/// of the parts after it fail, never panic.
fn offset(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

impl<K> Packed<K> {
    fn part(&self, flag: u8, from: u32, to: Option<u32>) -> Option<&str> {
        if self.has & flag == 0 {
            return None;
        }
        let from = from as usize;
        match to {
            Some(to) => self.names.get(from..to as usize),
            None => self.names.get(from..),
        }
    }

    fn namespace_str(&self) -> Option<&str> {
        self.part(NAMESPACE, 0, Some(self.name_at))
    }

    fn name_str(&self) -> Option<&str> {
        self.part(NAME, self.name_at, Some(self.cluster_at))
    }

    /// Whether this is a child of cluster `cluster` in `namespace`.
    pub fn belongs_to(&self, namespace: &str, cluster: &str) -> bool {
        self.namespace_str() == Some(namespace)
            && self.part(CLUSTER, self.cluster_at, None) == Some(cluster)
    }

    /// Bytes of the encoded (compressed) object.
    pub fn encoded_len(&self) -> usize {
        self.json.len()
    }
}

/// JSON kept compressed against the cache's dictionary ([`dictionary`]),
/// or as it is when it does not compress.
#[derive(Clone, Debug)]
pub struct Encoded {
    bytes: Box<[u8]>,
    /// The JSON's length when `bytes` is compressed; `u32::MAX` when they
    /// are the JSON itself.
    length: u32,
}

impl Encoded {
    pub fn new(json: Vec<u8>) -> Self {
        let compressed = u32::try_from(json.len())
            .ok()
            .filter(|length| *length < u32::MAX)
            .and_then(|length| Some((dictionary::compress(&json)?, length)));
        match compressed {
            Some((bytes, length)) => Self {
                bytes: bytes.into_boxed_slice(),
                length,
            },
            None => Self {
                bytes: json.into_boxed_slice(),
                length: u32::MAX,
            },
        }
    }

    /// The JSON.
    pub fn json(&self) -> Result<Cow<'_, [u8]>, String> {
        if self.length == u32::MAX {
            return Ok(Cow::Borrowed(&self.bytes));
        }
        dictionary::decompress(&self.bytes, self.length as usize).map(Cow::Owned)
    }

    /// Bytes kept.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// The store keys entries by kind, namespace and name; entries carry no
/// resourceVersion or uid, which no reconcile reads from a cached child.
impl<K: Resource> Lookup for Packed<K> {
    type DynamicType = K::DynamicType;

    fn kind(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dyntype)
    }

    fn group(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dyntype)
    }

    fn version(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dyntype)
    }

    fn plural(dyntype: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dyntype)
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        self.name_str().map(Cow::Borrowed)
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.namespace_str().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// A watch event with its object packed.
pub fn pack_event<K>(event: watcher::Event<K>) -> watcher::Event<Packed<K>>
where
    K: Resource + Serialize + DeserializeOwned,
{
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(Packed::pack(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(Packed::pack(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(Packed::pack(object)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use serde_json::json;

    fn service() -> Service {
        serde_json::from_value(json!({
            "metadata": {
                "name": "db-rw", "namespace": "shop", "uid": "u2", "resourceVersion": "17",
                "labels": {"tusk.dev/cluster": "db", "app.kubernetes.io/managed-by": "tusk"},
                "ownerReferences": [{"apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                                     "name": "db", "uid": "u1", "controller": true}]
            },
            "spec": {"type": "ClusterIP", "selector": {"tusk.dev/cluster": "db", "tusk.dev/role": "primary"},
                     "ports": [{"name": "postgres", "port": 5432, "targetPort": "postgres", "protocol": "TCP"}],
                     "clusterIP": "10.0.0.9"}
        }))
        .expect("service")
    }

    #[test]
    fn an_unpacked_object_is_the_packed_one() {
        let packed = Packed::pack(service());
        assert_eq!(packed.unpack().expect("unpacked"), service());
        assert_eq!(packed.name().as_deref(), Some("db-rw"));
        assert_eq!(packed.namespace().as_deref(), Some("shop"));
        // Kept compressed: a fraction of its JSON.
        let json = serde_json::to_vec(&service()).expect("JSON").len();
        assert!(
            packed.encoded_len() * 3 < json,
            "{} of {json} bytes",
            packed.encoded_len()
        );
    }

    #[test]
    fn entries_belong_to_their_cluster_by_label_and_namespace() {
        let packed = Packed::pack(service());
        assert!(packed.belongs_to("shop", "db"));
        assert!(!packed.belongs_to("shop", "db2"));
        assert!(!packed.belongs_to("other", "db"));
        let mut unlabelled = service();
        unlabelled.metadata.labels = None;
        assert!(!Packed::pack(unlabelled).belongs_to("shop", "db"));
    }

    #[test]
    fn an_object_without_namespace_or_label_comes_back_without() {
        let mut object = service();
        object.metadata.namespace = None;
        object.metadata.labels = None;
        let packed = Packed::pack(object.clone());
        assert_eq!(packed.unpack().expect("unpacked"), object);
        assert_eq!(packed.namespace(), None);
        assert!(!packed.belongs_to("", "db"));
    }

    #[test]
    fn an_undecodable_entry_names_its_kind_and_object() {
        let mut packed = Packed::pack(service());
        packed.json = Encoded::new(b"{\"spec\": 7}".to_vec());
        let error = packed.unpack().expect_err("undecodable");
        assert!(error.to_string().contains("Service db-rw"), "{error}");
        // Compressed bytes that do not decompress are named the same way.
        packed.json.bytes = b"not zstd".to_vec().into_boxed_slice();
        let error = packed.unpack().expect_err("undecompressible");
        assert!(error.to_string().contains("Service db-rw"), "{error}");
    }

    #[test]
    fn an_entry_is_smaller_than_the_decoded_object() {
        let packed = Packed::pack(service());
        assert!(packed.encoded_len() < std::mem::size_of::<Service>());
    }
}
