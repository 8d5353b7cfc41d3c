//! The controllers built into the API server: owner-reference garbage
//! collection (background, foreground, orphan), namespace deletion, and
//! cleanup of a deleted CRD's objects.
//!
//! They run as one sweep over all objects, woken by every deletion and
//! every few seconds, and repeated until nothing changes, so cascades of
//! any depth finish promptly.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::apiserver::crds;
use crate::apiserver::error::ApiError;
use crate::apiserver::objects::{self, DeleteOptions, FOREGROUND, ORPHAN, str_at};
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

pub async fn run(api: Arc<Api>) {
    loop {
        tokio::select! {
            _ = api.gc_wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        for _ in 0..50 {
            match api.store.mutate(|tx| sweep(&api, tx)) {
                Ok(true) => continue,
                Ok(false) => break,
                Err(error) => {
                    tracing::warn!(%error, "garbage collection sweep failed");
                    break;
                }
            }
        }
    }
}

fn finalizers(object: &Value) -> Vec<String> {
    objects::string_list(object.pointer("/metadata/finalizers"))
}

fn deleting(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some()
}

fn owner_refs(object: &Value) -> Vec<Value> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn delete_key(
    api: &Api,
    tx: &mut Transaction<'_>,
    key: &ObjectKey,
    propagation: &str,
) -> Result<bool, ApiError> {
    let Some(current) = tx.get(key) else {
        return Ok(false);
    };
    if deleting(&current) {
        return Ok(false);
    }
    let Some(resource) = api.registry.by_key(&key.resource) else {
        return Ok(false);
    };
    let options = DeleteOptions {
        propagation: Some(propagation.to_owned()),
        ..DeleteOptions::default()
    };
    let before = current.pointer("/metadata/resourceVersion").cloned();
    objects::delete(api, tx, &resource, key, &options)?;
    Ok(tx
        .get(key)
        .and_then(|o| o.pointer("/metadata/resourceVersion").cloned())
        != before)
}

fn set_owner_refs(tx: &mut Transaction<'_>, key: &ObjectKey, refs: Vec<Value>) {
    let Some(current) = tx.get(key) else {
        return;
    };
    let mut object = (*current).clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if refs.is_empty() {
            meta.remove("ownerReferences");
        } else {
            meta.insert("ownerReferences".into(), json!(refs));
        }
    }
    tx.put(key.clone(), object);
}

/// One pass; whether anything changed.
fn sweep(api: &Api, tx: &mut Transaction<'_>) -> Result<bool, ApiError> {
    let all = tx.all();
    let dependents = dependents_by_owner(&all);
    let mut changed = false;
    for (key, object) in all.iter().filter(|(_, o)| deleting(o)) {
        let Some(resource) = api.registry.by_key(&key.resource) else {
            continue;
        };
        let uid = str_at(object, "/metadata/uid").unwrap_or_default();
        let deps = dependents.get(uid).cloned().unwrap_or_default();
        changed |= propagate(api, tx, &resource, key, object, &deps)?;
        if key.resource == "/namespaces" {
            changed |= empty_namespace(api, tx, &resource, key)?;
        }
        if key.resource == crds::RESOURCE_KEY
            && finalizers(object)
                .iter()
                .any(|f| f == crds::CLEANUP_FINALIZER)
        {
            changed |= clean_crd(api, tx, &resource, key, object)?;
        }
    }
    changed |= collect_orphans(api, tx, &all)?;
    Ok(changed)
}

/// The objects that name each uid as an owner.
fn dependents_by_owner(all: &[(ObjectKey, Arc<Value>)]) -> HashMap<String, Vec<ObjectKey>> {
    let mut dependents: HashMap<String, Vec<ObjectKey>> = HashMap::new();
    for (key, object) in all {
        for reference in owner_refs(object) {
            if let Some(uid) = reference.get("uid").and_then(Value::as_str) {
                dependents
                    .entry(uid.to_owned())
                    .or_default()
                    .push(key.clone());
            }
        }
    }
    dependents
}

/// An owner being deleted with the orphan or foreground finalizer: its
/// dependents are released or deleted first.
fn propagate(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    object: &Value,
    deps: &[ObjectKey],
) -> Result<bool, ApiError> {
    let uid = str_at(object, "/metadata/uid").unwrap_or_default();
    let held = finalizers(object);
    let mut changed = false;
    if held.iter().any(|f| f == ORPHAN) {
        for dep in deps {
            if let Some(current) = tx.get(dep) {
                let refs: Vec<Value> = owner_refs(&current)
                    .into_iter()
                    .filter(|r| r.get("uid").and_then(Value::as_str) != Some(uid))
                    .collect();
                set_owner_refs(tx, dep, refs);
            }
        }
        objects::remove_finalizer(api, tx, resource, key, ORPHAN)?;
        changed = true;
    } else if held.iter().any(|f| f == FOREGROUND) {
        for dep in deps {
            changed |= delete_key(api, tx, dep, "Foreground")?;
        }
        let blocking = deps.iter().any(|dep| {
            tx.get(dep).is_some_and(|d| {
                owner_refs(&d).iter().any(|r| {
                    r.get("uid").and_then(Value::as_str) == Some(uid)
                        && r.get("blockOwnerDeletion") == Some(&Value::Bool(true))
                })
            })
        });
        if !blocking {
            objects::remove_finalizer(api, tx, resource, key, FOREGROUND)?;
            changed = true;
        }
    }
    Ok(changed)
}

/// Dependents whose owners are all gone are deleted; owner references to
/// owners that are gone are dropped.
fn collect_orphans(
    api: &Api,
    tx: &mut Transaction<'_>,
    all: &[(ObjectKey, Arc<Value>)],
) -> Result<bool, ApiError> {
    let uids: HashSet<String> = all
        .iter()
        .filter_map(|(_, o)| str_at(o, "/metadata/uid").map(str::to_owned))
        .collect();
    let mut changed = false;
    for (key, object) in all {
        let refs = owner_refs(object);
        if refs.is_empty() || tx.get(key).is_none() {
            continue;
        }
        let alive: Vec<Value> = refs
            .iter()
            .filter(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|u| uids.contains(u))
            })
            .cloned()
            .collect();
        if alive.is_empty() {
            changed |= delete_key(api, tx, key, "Background")?;
        } else if alive.len() < refs.len() {
            set_owner_refs(tx, key, alive);
            changed = true;
        }
    }
    Ok(changed)
}

fn empty_namespace(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
) -> Result<bool, ApiError> {
    let mut changed = false;
    for content in tx.keys_in_namespace(&key.name) {
        changed |= delete_key(api, tx, &content, "Background")?;
    }
    let held = tx.get(key).is_some_and(|ns| {
        ns.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    });
    if held && tx.keys_in_namespace(&key.name).is_empty() {
        objects::remove_finalizer(api, tx, resource, key, objects::NAMESPACE_FINALIZER)?;
        changed = true;
    }
    Ok(changed)
}

fn clean_crd(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    crd: &Value,
) -> Result<bool, ApiError> {
    let Some(served) = crds::served_key(crd) else {
        objects::remove_finalizer(api, tx, resource, key, crds::CLEANUP_FINALIZER)?;
        return Ok(true);
    };
    let mut changed = false;
    for item in tx.list(&served, None) {
        let item_key = ObjectKey::new(
            &served,
            str_at(&item, "/metadata/namespace").unwrap_or(""),
            str_at(&item, "/metadata/name").unwrap_or(""),
        );
        changed |= delete_key(api, tx, &item_key, "Background")?;
    }
    if tx.list(&served, None).is_empty() {
        objects::remove_finalizer(api, tx, resource, key, crds::CLEANUP_FINALIZER)?;
        changed = true;
    }
    Ok(changed)
}
