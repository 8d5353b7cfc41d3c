//! Deleting one object: preconditions, propagation (foreground, orphan),
//! finalizers and deletionTimestamp, graceful deletion, and the removal of
//! the finalizers the server itself manages.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::apiserver::error::ApiError;
use crate::apiserver::objects::kinds::{self, after_put, after_remove};
use crate::apiserver::objects::meta::{
    meta_mut, normalize_meta, str_at, string_list, without_volatile,
};
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// `DeleteOptions` that matter here.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub propagation: Option<String>,
    pub dry_run: bool,
    /// `gracePeriodSeconds`: for a Pod on a node, how long its kubelet may
    /// take; 0 deletes at once.
    pub grace_period: Option<i64>,
}

impl DeleteOptions {
    pub fn from_body(
        body: &Value,
        query_propagation: Option<&str>,
        query_grace: Option<&str>,
        dry_run: bool,
    ) -> Result<Self, ApiError> {
        let grace_period = match body.get("gracePeriodSeconds").and_then(Value::as_i64) {
            Some(seconds) => Some(seconds),
            None => query_grace
                .map(|text| {
                    text.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "gracePeriodSeconds: invalid value \"{text}\""
                        ))
                    })
                })
                .transpose()?,
        };
        let propagation = body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or(query_propagation)
            .map(str::to_owned);
        let orphan = body.get("orphanDependents").and_then(Value::as_bool);
        let propagation = match (propagation, orphan) {
            (Some(p), _) => Some(p),
            (None, Some(true)) => Some("Orphan".to_owned()),
            (None, Some(false)) => Some("Background".to_owned()),
            (None, None) => None,
        };
        if let Some(p) = &propagation
            && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
        {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Background\", \"Foreground\", \"Orphan\""
            )));
        }
        Ok(Self {
            uid: str_at(body, "/preconditions/uid").map(str::to_owned),
            resource_version: str_at(body, "/preconditions/resourceVersion").map(str::to_owned),
            propagation,
            grace_period,
            dry_run: dry_run
                || body
                    .get("dryRun")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(|v| v == "All")),
        })
    }
}

/// Deletes an object: at once, or by setting deletionTimestamp when
/// finalizers (including the garbage collector's) must run first.
pub fn delete(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    options: &DeleteOptions,
) -> Result<Arc<Value>, ApiError> {
    let Some(old) = tx.get(key) else {
        return Err(ApiError::not_found(&resource.qualified_plural(), &key.name));
    };
    check_preconditions(resource, key, &old, options)?;
    let mut object = (*old).clone();
    let already = object.pointer("/metadata/deletionTimestamp").is_some();
    let finalizers = with_propagation(&object, already, options);
    let rules = kinds::rules(resource);
    let grace = rules.grace_period(&object, options.grace_period);
    if finalizers.is_empty() && !rules.always_finalized() && grace.is_none() {
        if options.dry_run {
            return Ok(old);
        }
        let removed = tx.remove(key).unwrap_or(old);
        after_remove(api, resource, &removed);
        return Ok(removed);
    }
    {
        let meta = meta_mut(&mut object);
        meta.insert("finalizers".into(), json!(finalizers));
        if !already {
            let seconds = grace.unwrap_or(0);
            let at = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_secs(seconds))
                .unwrap_or_else(|_| jiff::Timestamp::now());
            meta.insert(
                "deletionTimestamp".into(),
                json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            );
            meta.insert("deletionGracePeriodSeconds".into(), json!(seconds));
        }
    }
    rules.deleting(&mut object, already, grace);
    normalize_meta(&mut object);
    if options.dry_run || without_volatile(&object) == without_volatile(&old) {
        return Ok(old);
    }
    let stored = tx.put(key.clone(), object);
    api.gc_wake.notify_one();
    Ok(stored)
}

/// The uid and resourceVersion preconditions of a delete.
fn check_preconditions(
    resource: &Resource,
    key: &ObjectKey,
    old: &Value,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    if let Some(uid) = &options.uid {
        let actual = str_at(old, "/metadata/uid").unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                &resource.qualified_plural(),
                &key.name,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &options.resource_version {
        let actual = str_at(old, "/metadata/resourceVersion").unwrap_or_default();
        if rv != actual {
            return Err(ApiError::conflict(
                &resource.qualified_plural(),
                &key.name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

/// The finalizers with the garbage collector's entry for the requested
/// propagation; a deletion in progress keeps the propagation it chose.
fn with_propagation(object: &Value, already: bool, options: &DeleteOptions) -> Vec<String> {
    let mut finalizers = string_list(object.pointer("/metadata/finalizers"));
    let propagation = if already {
        None
    } else {
        options.propagation.as_deref()
    };
    match propagation {
        Some("Foreground") if !finalizers.iter().any(|f| f == FOREGROUND) => {
            finalizers.retain(|f| f != ORPHAN);
            finalizers.push(FOREGROUND.into());
        }
        Some("Orphan") if !finalizers.iter().any(|f| f == ORPHAN) => {
            finalizers.retain(|f| f != FOREGROUND);
            finalizers.push(ORPHAN.into());
        }
        _ => {}
    }
    finalizers
}

/// Removes one finalizer the server itself manages (namespace, GC, CRD
/// cleanup) and deletes the object when none remain.
pub fn remove_finalizer(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    finalizer: &str,
) -> Result<(), ApiError> {
    let Some(old) = tx.get(key) else {
        return Ok(());
    };
    let mut object = (*old).clone();
    let mut finalizers = string_list(object.pointer("/metadata/finalizers"));
    finalizers.retain(|f| f != finalizer);
    meta_mut(&mut object).insert("finalizers".into(), json!(finalizers));
    let rules = kinds::rules(resource);
    rules.finalizer_removed(finalizer, &mut object);
    normalize_meta(&mut object);
    if finalizers.is_empty()
        && !rules.holds_removal(&object)
        && object.pointer("/metadata/deletionTimestamp").is_some()
    {
        let removed = tx.remove(key).unwrap_or(old);
        after_remove(api, resource, &removed);
    } else {
        let stored = tx.put(key.clone(), object);
        after_put(api, resource, &stored);
    }
    Ok(())
}
