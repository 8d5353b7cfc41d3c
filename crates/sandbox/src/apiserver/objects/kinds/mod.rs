//! What the write path does differently for some kinds, one entry per
//! kind: the Namespace finalizer and default ServiceAccount, the Service
//! cluster IP, the Pod's ServiceAccount check and graceful deletion, the
//! PersistentVolumeClaim's immutable fields, a Deployment's or ReplicaSet's
//! selector, and CRD registration.
//!
//! The write path in [`super`] calls these hooks at fixed points; a kind
//! that needs a new rule gets one [`KindRules`] implementation and one line
//! in `RULES`.

mod crd;
mod namespace;
mod pod;
mod pvc;
pub mod service;
mod workload;

use serde_json::Value;

use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::Transaction;

pub use namespace::NAMESPACE_FINALIZER;

/// An object the server makes beside a new one, as a Kubernetes controller
/// would right after it (a namespace's `default` ServiceAccount).
pub struct Companion {
    pub resource_key: &'static str,
    pub namespace: String,
    pub name: &'static str,
    pub object: Value,
}

/// The per-kind hooks of the write path. Every hook does nothing unless a
/// kind says otherwise.
pub trait KindRules: Sync {
    /// On create, after admission: fields the server sets. `now` is the
    /// object's creationTimestamp.
    fn created(
        &self,
        _tx: &Transaction<'_>,
        _name: &str,
        _now: &str,
        _object: &mut Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// On create, just before storing (after a dry run has returned).
    fn admit_stored(
        &self,
        _tx: &Transaction<'_>,
        _namespace: &str,
        _name: &str,
        _object: &Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Objects to create beside a newly stored one.
    fn companions(&self, _name: &str) -> Vec<Companion> {
        Vec::new()
    }

    /// On update, after admission: immutable fields and server-set fields.
    /// `status` is true for the status subresource.
    fn updated(&self, _old: &Value, _object: &mut Value, _status: bool, _causes: &mut Vec<Cause>) {}

    /// The grace period a deletion waits for, when something outside the
    /// API server (a kubelet) must act first; `None` deletes at once.
    fn grace_period(&self, _object: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether a deletion always goes through `deletionTimestamp`, even
    /// without finalizers.
    fn always_finalized(&self) -> bool {
        false
    }

    /// On delete, once `deletionTimestamp` and the finalizers are set;
    /// `already` is true when the object was being deleted before.
    fn deleting(&self, _object: &mut Value, _already: bool, _grace: Option<i64>) {}

    /// Whether a deleted object without finalizers must stay (waiting on a
    /// namespace's contents or a pod's kubelet).
    fn holds_removal(&self, _object: &Value) -> bool {
        false
    }

    /// After the server removed one of the finalizers it manages.
    fn finalizer_removed(&self, _finalizer: &str, _object: &mut Value) {}

    /// After the object was stored.
    fn stored(&self, _api: &Api, _object: &Value) {}

    /// After the object was removed from storage.
    fn removed(&self, _api: &Api, _object: &Value) {}
}

/// Kinds without rules of their own.
struct Ordinary;

impl KindRules for Ordinary {}

/// The kinds with rules of their own, by API group and kind.
const RULES: &[(&str, &str, &dyn KindRules)] = &[
    ("", "Namespace", &namespace::Namespace),
    ("", "Service", &service::Service),
    ("", "Pod", &pod::Pod),
    ("", "PersistentVolumeClaim", &pvc::PersistentVolumeClaim),
    ("apps", "Deployment", &workload::Workload),
    ("apps", "ReplicaSet", &workload::Workload),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        &crd::CustomResourceDefinition,
    ),
];

/// The rules of one kind.
pub fn rules(resource: &Resource) -> &'static dyn KindRules {
    RULES
        .iter()
        .find(|(group, kind, _)| resource.group == *group && resource.kind == *kind)
        .map_or(&Ordinary, |(_, _, rules)| *rules)
}

/// What follows storing an object.
pub fn after_put(api: &Api, resource: &Resource, stored: &Value) {
    rules(resource).stored(api, stored);
}

/// What follows removing an object: its kind's rule, and the garbage
/// collector looks for dependents.
pub fn after_remove(api: &Api, resource: &Resource, removed: &Value) {
    rules(resource).removed(api, removed);
    api.gc_wake.notify_one();
}
