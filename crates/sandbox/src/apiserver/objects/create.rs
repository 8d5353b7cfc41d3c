//! Creating one object: its name (or generateName), namespace, uid and
//! creationTimestamp, admission, its kind's rules, and field ownership.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::apiserver::admission::{self, Admitted, FieldValidation};
use crate::apiserver::apply::{self, Scope};
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::objects::kinds::{self, after_put};
use crate::apiserver::objects::meta::{meta_mut, normalize_meta, now, random_suffix};
use crate::apiserver::objects::options::{
    Manage, WriteOptions, Written, check_escalation, list_types,
};
use crate::apiserver::resources::Resource;
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Transaction};

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
    let namespace = namespace_of(tx, resource, namespace)?;
    let name = name_of(resource, meta_mut(&mut object))?;
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
    stamp(
        resource,
        version,
        &namespace,
        &name,
        &now,
        options,
        &mut object,
    );
    let admitted = admit(
        resource,
        version,
        &name,
        object,
        options.validation,
        name_problem,
    )?;
    let mut object = admitted.object;
    let rules = kinds::rules(resource);
    rules.created(tx, &name, &now, &mut object)?;
    check_escalation(tx, resource, &namespace, &name, (&object, None), options)?;
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
    rules.admit_stored(tx, &namespace, &name, &object)?;
    let stored = tx.put(key, object);
    after_put(api, resource, &stored);
    create_companions(api, tx, rules.companions(&name))?;
    Ok(Written {
        object: stored,
        warnings: admitted.warnings,
        created: true,
    })
}

/// The namespace a new object goes to, which must exist and not be
/// terminating; empty for cluster-scoped kinds.
fn namespace_of(
    tx: &Transaction<'_>,
    resource: &Resource,
    namespace: Option<&str>,
) -> Result<String, ApiError> {
    if !resource.namespaced {
        return Ok(String::new());
    }
    let namespace = namespace.ok_or_else(|| {
        ApiError::bad_request("the namespace of the object must be set for a namespaced resource")
    })?;
    check_namespace(tx, namespace, true)?;
    Ok(namespace.to_owned())
}

/// `metadata.name`, or `generateName` with a random suffix.
fn name_of(resource: &Resource, meta: &Map<String, Value>) -> Result<String, ApiError> {
    match meta.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => Ok(name.to_owned()),
        _ => match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => Ok(format!("{prefix}{}", random_suffix())),
            _ => Err(ApiError::invalid(
                &resource.qualified_kind(),
                "",
                vec![Cause::invalid(
                    "metadata.name",
                    "Required value: name or generateName is required",
                )],
            )),
        },
    }
}

/// Sets the metadata the server owns on a new object.
fn stamp(
    resource: &Resource,
    version: &str,
    namespace: &str,
    name: &str,
    now: &str,
    options: &WriteOptions<'_>,
    object: &mut Value,
) {
    let meta = meta_mut(object);
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
}

/// Admission, with a bad name reported first among the schema's causes.
fn admit(
    resource: &Resource,
    version: &str,
    name: &str,
    object: Value,
    validation: FieldValidation,
    name_problem: Option<Cause>,
) -> Result<Admitted, ApiError> {
    match (
        admission::admit(resource, version, None, object, validation),
        name_problem,
    ) {
        (Ok(admitted), None) => Ok(admitted),
        (Ok(_), Some(problem)) => Err(ApiError::invalid(
            &resource.qualified_kind(),
            name,
            vec![problem],
        )),
        (
            Err(ApiError::Invalid {
                kind,
                name,
                mut causes,
            }),
            Some(problem),
        ) => {
            causes.insert(0, problem);
            Err(ApiError::Invalid { kind, name, causes })
        }
        (Err(error), _) => Err(error),
    }
}

/// Creates what the server makes beside a new object, unless it exists.
fn create_companions(
    api: &Api,
    tx: &mut Transaction<'_>,
    companions: Vec<kinds::Companion>,
) -> Result<(), ApiError> {
    for companion in companions {
        let Some(resource) = api.registry.by_key(companion.resource_key) else {
            continue;
        };
        let key = ObjectKey::new(companion.resource_key, &companion.namespace, companion.name);
        if tx.get(&key).is_some() {
            continue;
        }
        let options = WriteOptions {
            manage: Manage::AlreadyRecorded,
            user: None,
            dry_run: false,
            validation: FieldValidation::Strict,
        };
        create(
            api,
            tx,
            &resource,
            "v1",
            Some(&companion.namespace),
            companion.object,
            &options,
        )?;
    }
    Ok(())
}

pub fn valid_name(resource: &Resource, name: &str) -> Option<String> {
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

pub fn check_namespace(
    tx: &Transaction<'_>,
    namespace: &str,
    creating: bool,
) -> Result<(), ApiError> {
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
