//! Pods: an existing ServiceAccount and its token volume (the
//! ServiceAccount admission plugin), immutable fields, and graceful
//! deletion through the kubelet.

use serde_json::{Value, json};

use super::KindRules;
use crate::apiserver::admission::{defaults, service_account};
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::objects::meta::random_suffix;
use crate::apiserver::objects::meta::{meta_mut, str_at};
use crate::apiserver::storage::{ObjectKey, Transaction};

pub struct Pod;

impl KindRules for Pod {
    /// The token volume, when the pod's ServiceAccount exists (a missing
    /// one is refused in [`KindRules::admit_stored`]) and automounting is
    /// not turned off.
    fn created(
        &self,
        tx: &Transaction<'_>,
        _name: &str,
        _now: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        let namespace = str_at(object, "/metadata/namespace").unwrap_or("default");
        let account = str_at(object, "/spec/serviceAccountName").unwrap_or("default");
        let key = ObjectKey::new("/serviceaccounts", namespace, account);
        if let Some(account) = tx.get(&key)
            && service_account::should_automount(object, &account)
        {
            service_account::mount_token(object, &random_suffix());
        }
        Ok(())
    }

    /// A Pod must name an existing ServiceAccount.
    fn admit_stored(
        &self,
        tx: &Transaction<'_>,
        namespace: &str,
        pod: &str,
        object: &Value,
    ) -> Result<(), ApiError> {
        let account = str_at(object, "/spec/serviceAccountName").unwrap_or("default");
        if tx
            .get(&ObjectKey::new("/serviceaccounts", namespace, account))
            .is_some()
        {
            return Ok(());
        }
        Err(ApiError::Forbidden {
            message: format!(
                "pods \"{pod}\" is forbidden: error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
            ),
        })
    }

    fn updated(&self, old: &Value, object: &mut Value, status: bool, causes: &mut Vec<Cause>) {
        if !status {
            defaults::pod_update(old, object, causes);
        }
    }

    /// A Pod bound to a node is deleted gracefully, as on Kubernetes: it is
    /// marked with a deletionTimestamp and its kubelet removes it (with
    /// grace period 0) once its containers have stopped. Unbound and
    /// finished pods, and deletions with grace period 0, go at once.
    fn grace_period(&self, pod: &Value, requested: Option<i64>) -> Option<i64> {
        let bound = str_at(pod, "/spec/nodeName").is_some_and(|n| !n.is_empty());
        let finished = matches!(str_at(pod, "/status/phase"), Some("Succeeded" | "Failed"));
        let seconds = requested
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0);
        (bound && !finished && seconds > 0).then_some(seconds)
    }

    fn deleting(&self, object: &mut Value, already: bool, grace: Option<i64>) {
        if already && grace.is_none() {
            // The kubelet's final delete (grace period 0).
            meta_mut(object).insert("deletionGracePeriodSeconds".into(), json!(0));
        }
    }

    /// A Pod whose graceful deletion waits for its kubelet.
    fn holds_removal(&self, object: &Value) -> bool {
        object
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|s| s > 0)
    }
}
