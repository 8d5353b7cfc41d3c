//! The root CA publisher (kube-controller-manager's
//! `root-ca-cert-publisher`): a ConfigMap `kube-root-ca.crt` holding the
//! cluster CA as `ca.crt` in every namespace, put back when deleted or
//! changed. Pods' token volumes project it, so in-cluster clients can
//! verify the API server.
//!
//! It runs in the API server's process on its storage, woken by every
//! change to a namespace or to one of these ConfigMaps, and every few
//! seconds.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::admission::service_account::ROOT_CA_CONFIG_MAP;
use crate::apiserver::error::ApiError;
use crate::apiserver::objects::{self, Manage, WriteOptions, str_at};
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

const MANAGER: &str = "kube-controller-manager";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

pub async fn run(api: Arc<Api>, ca_pem: String) {
    let mut changes = match api.store.snapshot_and_subscribe("/namespaces", None) {
        Ok((_, _, changes)) => changes,
        Err(error) => {
            tracing::error!(%error, "the root CA publisher cannot watch storage");
            return;
        }
    };
    loop {
        if let Err(error) = api.store.mutate(|tx| publish(&api, tx, &ca_pem)) {
            tracing::warn!(%error, "cannot publish the root CA; retrying");
        }
        let wait = async {
            loop {
                match changes.recv().await {
                    Ok(change) if concerns(&change.key) => return true,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => return true,
                    Err(RecvError::Closed) => return false,
                }
            }
        };
        tokio::select! {
            open = wait => if !open { return },
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

fn concerns(key: &ObjectKey) -> bool {
    key.resource == "/namespaces"
        || (key.resource == "/configmaps" && key.name == ROOT_CA_CONFIG_MAP)
}

/// Makes the ConfigMap right in every namespace that is not terminating.
fn publish(api: &Api, tx: &mut Transaction<'_>, ca_pem: &str) -> Result<(), ApiError> {
    let Some(resource) = api.registry.by_key("/configmaps") else {
        return Err(ApiError::internal("configmaps are not served"));
    };
    let options = WriteOptions {
        manage: Manage::Update(MANAGER),
        dry_run: false,
        validation: FieldValidation::Strict,
        user: None,
    };
    let namespaces: Vec<String> = tx
        .list("/namespaces", None)
        .iter()
        .filter(|ns| ns.pointer("/metadata/deletionTimestamp").is_none())
        .filter_map(|ns| str_at(ns, "/metadata/name").map(str::to_owned))
        .collect();
    for namespace in namespaces {
        let key = ObjectKey::new("/configmaps", &namespace, ROOT_CA_CONFIG_MAP);
        match tx.get(&key) {
            None => {
                let object = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": ROOT_CA_CONFIG_MAP,
                        "annotations": {"kubernetes.io/description": DESCRIPTION}},
                    "data": {"ca.crt": ca_pem}
                });
                objects::create(api, tx, &resource, "v1", Some(&namespace), object, &options)?;
            }
            Some(current)
                if !deleting(&current)
                    && current.pointer("/data/ca.crt").and_then(Value::as_str) != Some(ca_pem) =>
            {
                let mut object = (*current).clone();
                object["data"] = json!({"ca.crt": ca_pem});
                objects::update(
                    api, tx, &resource, "v1", &key, object, false, false, &options,
                )?;
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some()
}
