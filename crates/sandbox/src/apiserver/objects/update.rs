//! Replacing one object (PUT, and the end of every PATCH): preconditions,
//! the split between the main resource and the status subresource,
//! metadata the server owns, its kind's rules, generation, field
//! ownership, and no-op writes that change nothing.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::apiserver::admission;
use crate::apiserver::apply;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::objects::kinds::{self, after_put, after_remove};
use crate::apiserver::objects::meta::{
    content, meta_mut, normalize_meta, now, str_at, string_list, without_volatile,
};
use crate::apiserver::objects::options::{
    Manage, WriteOptions, Written, check_escalation, list_types, scope_of,
};
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

/// Replaces an object. `status` selects the status subresource;
/// `require_rv` asks custom resources for a resourceVersion (PUT).
#[allow(clippy::too_many_arguments)]
pub fn update(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    version: &str,
    key: &ObjectKey,
    mut object: Value,
    status: bool,
    require_rv: bool,
    options: &WriteOptions<'_>,
) -> Result<Written, ApiError> {
    let Some(old) = tx.get(key) else {
        return Err(ApiError::not_found(&resource.qualified_plural(), &key.name));
    };
    check_identity(resource, key, &old, &object, require_rv)?;
    carry_status(resource, version, &old, &mut object, status);
    keep_metadata(resource, &key.name, &old, &mut object)?;
    object["apiVersion"] = json!(resource.api_version(version));
    object["kind"] = json!(resource.kind);
    let admitted = admission::admit(resource, version, Some(&old), object, options.validation)?;
    let mut object = admitted.object;
    let rules = kinds::rules(resource);
    let mut causes = Vec::new();
    rules.updated(&old, &mut object, status, &mut causes);
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            &resource.qualified_kind(),
            &key.name,
            causes,
        ));
    }
    let namespace = &key.namespace;
    check_escalation(
        tx,
        resource,
        namespace,
        &key.name,
        (&object, Some(&old)),
        options,
    )?;
    if resource.tracks_generation() && content(&object) != content(&old) {
        let generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut object).insert("generation".into(), json!(generation + 1));
    }
    if let Manage::Update(manager) = options.manage {
        let types = list_types(resource, version);
        apply::record_update(
            Some(&old),
            &mut object,
            &apply::Write {
                manager,
                subresource: if status { "status" } else { "" },
                api_version: &resource.api_version(version),
                scope: scope_of(resource, version, status),
                time: &now(),
                types: types.as_ref(),
            },
        );
    }
    normalize_meta(&mut object);
    let written = |object| Written {
        object,
        warnings: admitted.warnings.clone(),
        created: false,
    };
    if without_volatile(&object) == without_volatile(&old) {
        return Ok(written(old));
    }
    if options.dry_run {
        return Ok(written(Arc::new(object)));
    }
    Ok(written(store(api, tx, resource, key, object, old)))
}

/// The name, namespace and resourceVersion of the body against the URL
/// and the stored object.
fn check_identity(
    resource: &Resource,
    key: &ObjectKey,
    old: &Value,
    object: &Value,
    require_rv: bool,
) -> Result<(), ApiError> {
    let name = &key.name;
    if !object.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if let Some(body_name) = str_at(object, "/metadata/name")
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if resource.namespaced
        && let Some(ns) = str_at(object, "/metadata/namespace")
        && !ns.is_empty()
        && ns != key.namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    match str_at(object, "/metadata/resourceVersion") {
        Some(rv) if !rv.is_empty() && str_at(old, "/metadata/resourceVersion") != Some(rv) => {
            Err(ApiError::stale(&resource.qualified_plural(), name))
        }
        Some(rv) if !rv.is_empty() => Ok(()),
        _ if require_rv && resource.custom => Err(ApiError::invalid(
            &resource.qualified_kind(),
            name,
            vec![Cause::invalid(
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )],
        )),
        _ => Ok(()),
    }
}

/// A status write changes only the status (and managedFields); a write to
/// the main resource keeps the stored status.
fn carry_status(resource: &Resource, version: &str, old: &Value, object: &mut Value, status: bool) {
    if status {
        let new_status = object.get("status").cloned();
        let managed = object.pointer("/metadata/managedFields").cloned();
        *object = old.clone();
        match new_status {
            Some(s) => object["status"] = s,
            None => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        if let Some(managed) = managed {
            meta_mut(object).insert("managedFields".into(), managed);
        }
    } else if resource.has_status(version) {
        match old.get("status") {
            Some(s) => object["status"] = s.clone(),
            None => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
}

/// Keeps the metadata only the server sets, and refuses new finalizers on
/// an object being deleted.
fn keep_metadata(
    resource: &Resource,
    name: &str,
    old: &Value,
    object: &mut Value,
) -> Result<(), ApiError> {
    let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
    let meta = meta_mut(object);
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    if old_meta.get("deletionTimestamp").is_none() {
        return Ok(());
    }
    let before = string_list(old_meta.get("finalizers"));
    let after = string_list(meta.get("finalizers"));
    match after.iter().find(|f| !before.contains(f)) {
        Some(added) => Err(ApiError::invalid(
            &resource.qualified_kind(),
            name,
            vec![Cause {
                field: "metadata.finalizers".into(),
                message: format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{added}\"}}"
                ),
                reason: "FieldValueForbidden",
            }],
        )),
        None => Ok(()),
    }
}

/// Stores the updated object, or removes it when it was being deleted and
/// nothing holds it any more.
fn store(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    key: &ObjectKey,
    object: Value,
    old: Arc<Value>,
) -> Arc<Value> {
    let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
    let finalizers = string_list(object.pointer("/metadata/finalizers"));
    if deleting && finalizers.is_empty() && !kinds::rules(resource).holds_removal(&object) {
        let removed = tx.remove(key).unwrap_or(old);
        after_remove(api, resource, &removed);
        return removed;
    }
    let stored = tx.put(key.clone(), object);
    after_put(api, resource, &stored);
    if deleting {
        api.gc_wake.notify_one();
    }
    stored
}
