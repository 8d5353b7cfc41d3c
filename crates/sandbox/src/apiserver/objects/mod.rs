//! The write path shared by every verb and by the garbage collector:
//! create, update and delete of one object inside a storage transaction.
//!
//! Here live the rules that hold for every kind: names and generateName,
//! uid and creationTimestamp, resourceVersion preconditions, the split
//! between the main resource and the status subresource, generation,
//! finalizers and deletionTimestamp, namespaces that are missing or
//! terminating, and no-op writes that change nothing (and so neither bump
//! the resourceVersion nor wake watches).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::apiserver::admission::defaults;
use crate::apiserver::admission::{self, FieldValidation};
use crate::apiserver::apply::{self, BuiltinLists, ListTypes, SchemaLists, Scope};
use crate::apiserver::crds;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";
/// The namespace controller's `spec.finalizers` entry.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// How field ownership is recorded for a write.
pub enum Manage<'a> {
    /// An ordinary write by this manager.
    Update(&'a str),
    /// Server-side apply already computed managedFields.
    AlreadyRecorded,
}

pub struct WriteOptions<'a> {
    pub manage: Manage<'a>,
    pub dry_run: bool,
    pub validation: FieldValidation,
}

pub struct Written {
    pub object: Arc<Value>,
    pub warnings: Vec<String>,
    pub created: bool,
}

pub fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The metadata map of an object the caller has checked is a JSON object.
fn meta_mut(object: &mut Value) -> &mut serde_json::Map<String, Value> {
    let metadata = &mut object["metadata"];
    if !metadata.is_object() {
        *metadata = Value::Object(serde_json::Map::new());
    }
    match metadata {
        Value::Object(map) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

pub fn list_types<'r>(resource: &'r Resource, version: &str) -> Box<dyn ListTypes + 'r> {
    match resource.version(version).and_then(|v| v.schema.as_ref()) {
        Some(schema) if resource.custom => Box::new(SchemaLists(schema)),
        _ => Box::new(BuiltinLists),
    }
}

pub fn scope_of(resource: &Resource, version: &str, status: bool) -> Scope {
    if status {
        Scope::Status
    } else if resource.has_status(version) {
        Scope::Main
    } else {
        Scope::Whole
    }
}

fn valid_name(resource: &Resource, name: &str) -> Option<String> {
    if resource.group == "rbac.authorization.k8s.io" {
        // RBAC names only need to be valid path segments.
        return (name.is_empty() || name.contains('/') || name == "." || name == "..")
            .then(|| format!("Invalid value: \"{name}\": may not contain '/'"));
    }
    let label = matches!(resource.kind.as_str(), "Namespace" | "Service");
    let max = if label { 63 } else { 253 };
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!label && c == '.'));
    let ends_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > max || !ok_chars || !ends_ok {
        let what = if label {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        } else {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        };
        return Some(format!("Invalid value: \"{name}\": {what}"));
    }
    None
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

fn check_namespace(tx: &Transaction<'_>, namespace: &str, creating: bool) -> Result<(), ApiError> {
    let key = ObjectKey::new("/namespaces", "", namespace);
    match tx.get(&key) {
        None => Err(ApiError::not_found("namespaces", namespace)),
        Some(ns) if creating && ns.pointer("/metadata/deletionTimestamp").is_some() => {
            Err(ApiError::Forbidden {
                message: format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            })
        }
        Some(_) => Ok(()),
    }
}

fn allocate_cluster_ip(tx: &Transaction<'_>) -> Result<String, ApiError> {
    let used: std::collections::HashSet<String> = tx
        .list("/services", None)
        .iter()
        .filter_map(|s| str_at(s, "/spec/clusterIP").map(str::to_owned))
        .collect();
    for third in 0..=255u16 {
        for fourth in 1..=254u16 {
            let ip = format!("127.1.{third}.{fourth}");
            if !used.contains(&ip) {
                return Ok(ip);
            }
        }
    }
    Err(ApiError::internal(
        "the cluster IP range 127.1.0.0/16 is full",
    ))
}

/// Creates an object.
pub fn create(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource: &Resource,
    version: &str,
    namespace: Option<&str>,
    mut object: Value,
    options: &WriteOptions<'_>,
) -> Result<Written, ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let namespace = if resource.namespaced {
        let namespace = namespace.ok_or_else(|| {
            ApiError::bad_request(
                "the namespace of the object must be set for a namespaced resource",
            )
        })?;
        check_namespace(tx, namespace, true)?;
        namespace.to_owned()
    } else {
        String::new()
    };
    let meta = meta_mut(&mut object);
    let name = match meta.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", random_suffix()),
            _ => {
                return Err(ApiError::invalid(
                    &resource.qualified_kind(),
                    "",
                    vec![Cause::invalid(
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )],
                ));
            }
        },
    };
    // Reported together with the schema's findings, as Kubernetes does.
    let name_problem = valid_name(resource, &name).map(|p| Cause::invalid("metadata.name", p));
    let key = ObjectKey::new(&resource.key, &namespace, &name);
    if tx.get(&key).is_some() {
        return Err(ApiError::AlreadyExists {
            kind: resource.qualified_plural(),
            name,
        });
    }
    let now = now();
    meta.insert("name".into(), json!(name));
    if resource.namespaced {
        meta.insert("namespace".into(), json!(namespace));
    } else {
        meta.remove("namespace");
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now));
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "selfLink",
    ] {
        meta.remove(field);
    }
    if resource.tracks_generation() {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if !matches!(options.manage, Manage::AlreadyRecorded) {
        meta.remove("managedFields");
    }
    object["apiVersion"] = json!(resource.api_version(version));
    object["kind"] = json!(resource.kind);
    let admitted = match (
        admission::admit(resource, version, None, object, options.validation),
        name_problem,
    ) {
        (Ok(admitted), None) => admitted,
        (Ok(_), Some(problem)) => {
            return Err(ApiError::invalid(
                &resource.qualified_kind(),
                &name,
                vec![problem],
            ));
        }
        (
            Err(ApiError::Invalid {
                kind,
                name,
                mut causes,
            }),
            Some(problem),
        ) => {
            causes.insert(0, problem);
            return Err(ApiError::Invalid { kind, name, causes });
        }
        (Err(error), _) => return Err(error),
    };
    let mut object = admitted.object;
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Service") => {
            let ip = if defaults::service_needs_ip(&object) {
                Some(allocate_cluster_ip(tx)?)
            } else {
                None
            };
            defaults::service(&mut object, ip);
        }
        ("", "Namespace") => {
            object["spec"] = json!({"finalizers": [NAMESPACE_FINALIZER]});
            object["status"] = json!({"phase": "Active"});
            meta_mut(&mut object)
                .entry("labels")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(|labels| labels.insert("kubernetes.io/metadata.name".into(), json!(name)));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let causes = crds::validate(&object);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&resource.qualified_kind(), &name, causes));
            }
            object["status"] = crds::established_status(&object, &now);
            let finalizers = meta_mut(&mut object)
                .entry("finalizers")
                .or_insert_with(|| json!([]));
            if let Some(list) = finalizers.as_array_mut()
                && !list.iter().any(|f| f == crds::CLEANUP_FINALIZER)
            {
                list.push(json!(crds::CLEANUP_FINALIZER));
            }
        }
        _ => {}
    }
    if let Manage::Update(manager) = options.manage {
        let types = list_types(resource, version);
        apply::record_update(
            None,
            &mut object,
            &apply::Write {
                manager,
                subresource: "",
                api_version: &resource.api_version(version),
                scope: Scope::Whole,
                time: &now,
                types: types.as_ref(),
            },
        );
    }
    normalize_meta(&mut object);
    if options.dry_run {
        return Ok(Written {
            object: Arc::new(object),
            warnings: admitted.warnings,
            created: true,
        });
    }
    if resource.key == "/pods" {
        check_service_account(tx, &namespace, &name, &object)?;
    }
    let stored = tx.put(key, object);
    after_put(api, resource, &stored);
    if resource.key == "/namespaces" {
        create_default_service_account(api, tx, &name)?;
    }
    Ok(Written {
        object: stored,
        warnings: admitted.warnings,
        created: true,
    })
}

/// Every namespace gets a `default` ServiceAccount, as the ServiceAccount
/// controller makes one on Kubernetes.
fn create_default_service_account(
    api: &Api,
    tx: &mut Transaction<'_>,
    namespace: &str,
) -> Result<(), ApiError> {
    let key = ObjectKey::new("/serviceaccounts", namespace, "default");
    let Some(accounts) = api.registry.by_key("/serviceaccounts") else {
        return Ok(());
    };
    if tx.get(&key).is_some() {
        return Ok(());
    }
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let options = WriteOptions {
        manage: Manage::AlreadyRecorded,
        dry_run: false,
        validation: FieldValidation::Strict,
    };
    create(api, tx, &accounts, "v1", Some(namespace), account, &options).map(|_| ())
}

/// A Pod must name an existing ServiceAccount (the ServiceAccount admission
/// plugin refuses it otherwise).
fn check_service_account(
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

/// Kubernetes omits empty metadata lists and maps.
fn normalize_meta(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "finalizers",
            "ownerReferences",
            "labels",
            "annotations",
            "managedFields",
        ] {
            let empty = match meta.get(field) {
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                meta.remove(field);
            }
        }
    }
}

fn after_put(api: &Api, resource: &Resource, stored: &Value) {
    if resource.key == crds::RESOURCE_KEY
        && let Some(served) = crds::resource(stored)
    {
        api.registry.insert(served);
    }
}

fn after_remove(api: &Api, resource: &Resource, removed: &Value) {
    if resource.key == crds::RESOURCE_KEY
        && let Some(served) = crds::resource(removed)
    {
        api.registry.remove(&served.key);
    }
    api.gc_wake.notify_one();
}

/// Everything that is not metadata or status: what `generation` tracks.
fn content(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        for field in ["metadata", "status", "apiVersion", "kind"] {
            map.remove(field);
        }
    }
    copy
}

fn without_volatile(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("time");
            }
        }
    }
    copy
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Replaces an object (PUT, and the end of every PATCH). `status` selects
/// the status subresource.
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
    let name = key.name.clone();
    if !object.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if let Some(body_name) = str_at(&object, "/metadata/name")
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if resource.namespaced
        && let Some(ns) = str_at(&object, "/metadata/namespace")
        && !ns.is_empty()
        && ns != key.namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    match str_at(&object, "/metadata/resourceVersion") {
        Some(rv) if !rv.is_empty() && str_at(&old, "/metadata/resourceVersion") != Some(rv) => {
            return Err(ApiError::stale(&resource.qualified_plural(), &name));
        }
        Some(rv) if !rv.is_empty() => {}
        _ if require_rv && resource.custom => {
            return Err(ApiError::invalid(
                &resource.qualified_kind(),
                &name,
                vec![Cause::invalid(
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )],
            ));
        }
        _ => {}
    }
    let has_status = resource.has_status(version);
    if status {
        // Only status changes; metadata other than managedFields stays.
        let new_status = object.get("status").cloned();
        let managed = object.pointer("/metadata/managedFields").cloned();
        object = (*old).clone();
        match new_status {
            Some(s) => object["status"] = s,
            None => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        if let Some(managed) = managed {
            meta_mut(&mut object).insert("managedFields".into(), managed);
        }
    } else if has_status {
        match old.get("status") {
            Some(s) => object["status"] = s.clone(),
            None => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    {
        let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
        let meta = meta_mut(&mut object);
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
        if old_meta.get("deletionTimestamp").is_some() {
            let before = string_list(old_meta.get("finalizers"));
            let after = string_list(meta.get("finalizers"));
            if let Some(added) = after.iter().find(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    &resource.qualified_kind(),
                    &name,
                    vec![Cause {
                        field: "metadata.finalizers".into(),
                        message: format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{added}\"}}"
                        ),
                        reason: "FieldValueForbidden",
                    }],
                ));
            }
        }
    }
    object["apiVersion"] = json!(resource.api_version(version));
    object["kind"] = json!(resource.kind);
    let admitted = admission::admit(resource, version, Some(&old), object, options.validation)?;
    let mut object = admitted.object;
    let mut causes = Vec::new();
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Service") => {
            defaults::service_update(&old, &mut object, &mut causes);
            defaults::service(&mut object, None);
        }
        ("", "PersistentVolumeClaim") if !status => {
            defaults::pvc_update(&old, &object, &mut causes)
        }
        ("", "Pod") if !status => defaults::pod_update(&old, &object, &mut causes),
        ("", "Namespace") if !status && old.get("spec").is_some() => {
            object["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") if !status => {
            causes.extend(crds::validate(&object));
            if str_at(&object, "/spec/group") != str_at(&old, "/spec/group") {
                causes.push(Cause::invalid(
                    "spec.group",
                    "Invalid value: field is immutable",
                ));
            }
            if causes.is_empty() {
                object["status"] = crds::established_status(&object, &now());
            }
        }
        _ => {}
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&resource.qualified_kind(), &name, causes));
    }
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
    if without_volatile(&object) == without_volatile(&old) {
        return Ok(Written {
            object: old,
            warnings: admitted.warnings,
            created: false,
        });
    }
    if options.dry_run {
        return Ok(Written {
            object: Arc::new(object),
            warnings: admitted.warnings,
            created: false,
        });
    }
    let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
    let finalizers = string_list(object.pointer("/metadata/finalizers"));
    if deleting && finalizers.is_empty() && !namespace_held(&object) && !kubelet_pending(&object) {
        let removed = tx.remove(key).unwrap_or(old);
        after_remove(api, resource, &removed);
        return Ok(Written {
            object: removed,
            warnings: admitted.warnings,
            created: false,
        });
    }
    let stored = tx.put(key.clone(), object);
    after_put(api, resource, &stored);
    if deleting {
        api.gc_wake.notify_one();
    }
    Ok(Written {
        object: stored,
        warnings: admitted.warnings,
        created: false,
    })
}

/// A Pod whose graceful deletion waits for its kubelet.
fn kubelet_pending(object: &Value) -> bool {
    str_at(object, "/kind") == Some("Pod")
        && object
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|s| s > 0)
}

fn namespace_held(object: &Value) -> bool {
    str_at(object, "/kind") == Some("Namespace")
        && !string_list(object.pointer("/spec/finalizers")).is_empty()
}

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
    if let Some(uid) = &options.uid {
        let actual = str_at(&old, "/metadata/uid").unwrap_or_default();
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
        let actual = str_at(&old, "/metadata/resourceVersion").unwrap_or_default();
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
    let mut object = (*old).clone();
    let mut finalizers = string_list(object.pointer("/metadata/finalizers"));
    let already = object.pointer("/metadata/deletionTimestamp").is_some();
    // The propagation of a deletion in progress stays as it was chosen.
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
    let is_namespace = resource.key == "/namespaces";
    let grace = pod_grace_period(resource, &object, options.grace_period);
    if finalizers.is_empty() && !is_namespace && grace.is_none() {
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
        } else if grace.is_none() && resource.key == "/pods" {
            // The kubelet's final delete (grace period 0).
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
    }
    if is_namespace {
        object["status"] = json!({"phase": "Terminating"});
    }
    normalize_meta(&mut object);
    if options.dry_run || without_volatile(&object) == without_volatile(&old) {
        return Ok(old);
    }
    let stored = tx.put(key.clone(), object);
    api.gc_wake.notify_one();
    Ok(stored)
}

/// A Pod bound to a node is deleted gracefully, as on Kubernetes: it is
/// marked with a deletionTimestamp and its kubelet removes it (with grace
/// period 0) once its containers have stopped. Unbound and finished pods,
/// and deletions with grace period 0, go at once (`None`).
fn pod_grace_period(resource: &Resource, pod: &Value, requested: Option<i64>) -> Option<i64> {
    if resource.key != "/pods" {
        return None;
    }
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
    if finalizer == NAMESPACE_FINALIZER {
        object["spec"] = json!({});
    }
    normalize_meta(&mut object);
    if finalizers.is_empty()
        && !namespace_held(&object)
        && !kubelet_pending(&object)
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
