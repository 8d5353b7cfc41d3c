//! Namespaces: the namespace controller's finalizer, the `Active` and
//! `Terminating` phases, the name label, and a `default` ServiceAccount in
//! every namespace, as the ServiceAccount controller makes one.

use serde_json::{Value, json};

use super::{Companion, KindRules};
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::objects::meta::{meta_mut, string_list};
use crate::apiserver::storage::Transaction;

/// The namespace controller's `spec.finalizers` entry.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

pub struct Namespace;

impl KindRules for Namespace {
    fn created(
        &self,
        _tx: &Transaction<'_>,
        name: &str,
        _now: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        object["spec"] = json!({"finalizers": [NAMESPACE_FINALIZER]});
        object["status"] = json!({"phase": "Active"});
        meta_mut(object)
            .entry("labels")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|labels| labels.insert("kubernetes.io/metadata.name".into(), json!(name)));
        Ok(())
    }

    fn companions(&self, name: &str) -> Vec<Companion> {
        vec![Companion {
            resource_key: "/serviceaccounts",
            namespace: name.to_owned(),
            name: "default",
            object: json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        }]
    }

    fn updated(&self, old: &Value, object: &mut Value, status: bool, _causes: &mut Vec<Cause>) {
        // `spec.finalizers` changes only through the finalize subresource.
        if !status && old.get("spec").is_some() {
            object["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        }
    }

    fn always_finalized(&self) -> bool {
        true
    }

    fn deleting(&self, object: &mut Value, _already: bool, _grace: Option<i64>) {
        object["status"] = json!({"phase": "Terminating"});
    }

    fn holds_removal(&self, object: &Value) -> bool {
        !string_list(object.pointer("/spec/finalizers")).is_empty()
    }

    fn finalizer_removed(&self, finalizer: &str, object: &mut Value) {
        if finalizer == NAMESPACE_FINALIZER {
            object["spec"] = json!({});
        }
    }
}
