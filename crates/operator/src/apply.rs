//! Applying desired children with the fewest writes (R9, R14).
//!
//! Children are sent with server-side apply under one field manager, but
//! only when the live object differs from the desired one in a field the
//! operator sets: a converged reconcile makes no write at all, and a child
//! someone edited (say, the `-rw` Service's selector) is restored on the
//! next reconcile.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::Error;

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "tusk-operator";

/// What an apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    Created,
    Updated,
    Unchanged,
    /// An object of that name existed, unknown to the cache; it was left
    /// as it is.
    Existing,
}

/// Server-side applies `desired` unless `live` already has every field it sets.
pub async fn apply<K>(api: &Api<K>, live: Option<&K>, desired: &K) -> Result<Applied, Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    K::DynamicType: Default,
{
    let desired_value = serde_json::to_value(desired)
        .map_err(|e| Error::Refused(format!("cannot serialize {}: {e}", desired.name_any())))?;
    let change = change_to(live, &desired_value);
    if change == Applied::Unchanged {
        return Ok(Applied::Unchanged);
    }
    let name = desired.name_any();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(
        &name,
        &params,
        &Patch::Apply(with_type_meta::<K>(desired_value)),
    )
    .await
    .map_err(Error::kube(format!("apply {kind} {name}")))?;
    Ok(change)
}

/// What applying `desired` over `live` does: create it, update it (it
/// differs in a field the operator sets), or nothing. Pure: `tusk plan`
/// asks it too.
pub fn change<K: Serialize>(live: Option<&K>, desired: &K) -> Applied {
    match serde_json::to_value(desired) {
        Ok(desired) => change_to(live, &desired),
        Err(_) => Applied::Updated,
    }
}

/// [`change`], with `desired` already serialized.
fn change_to<K: Serialize>(live: Option<&K>, desired: &Value) -> Applied {
    let Some(live) = live else {
        return Applied::Created;
    };
    match serde_json::to_value(live) {
        Ok(live) if is_subset(desired, &live) => Applied::Unchanged,
        _ => Applied::Updated,
    }
}

/// Creates `desired` if no object of its name exists; never changes an
/// existing one (used for Secrets, whose generated passwords must never be
/// regenerated).
pub async fn create_once<K>(api: &Api<K>, live: Option<&K>, desired: &K) -> Result<Applied, Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    K::DynamicType: Default,
{
    if live.is_some() {
        return Ok(Applied::Unchanged);
    }
    let name = desired.name_any();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    match api
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            },
            desired,
        )
        .await
    {
        Ok(_) => Ok(Applied::Created),
        // The caller tells whether it is its own (created meanwhile, the
        // cache not yet showing it) or someone else's.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Applied::Existing),
        Err(source) => Err(Error::Kube {
            action: format!("create {kind} {name}"),
            source,
        }),
    }
}

/// Server-side apply needs apiVersion and kind in the body.
fn with_type_meta<K>(mut value: Value) -> Value
where
    K: Resource,
    K::DynamicType: Default,
{
    let dt = K::DynamicType::default();
    if let Value::Object(map) = &mut value {
        map.insert(
            "apiVersion".into(),
            Value::String(K::api_version(&dt).into_owned()),
        );
        map.insert("kind".into(), Value::String(K::kind(&dt).into_owned()));
    }
    value
}

/// Whether every field set in `desired` has the same value in `live`.
/// Lists must have the same length and match element by element (the API
/// server adds defaults inside elements, never elements).
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| {
            // Status and server-managed metadata are not ours to compare.
            if key == "status" {
                return true;
            }
            have.get(key).is_some_and(|live| is_subset(value, live))
        }),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| is_subset(w, h))
        }
        (want, have) => want == have,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_added_by_the_server_do_not_count_as_drift() {
        let desired = json!({"spec": {"ports": [{"port": 5432, "name": "postgres"}], "selector": {"a": "b"}}});
        let live = json!({"spec": {"ports": [{"port": 5432, "name": "postgres", "protocol": "TCP"}],
                                   "selector": {"a": "b"}, "clusterIP": "127.0.1.1"},
                          "status": {"loadBalancer": {}}});
        assert!(is_subset(&desired, &live));
    }

    #[test]
    fn an_edited_field_is_drift() {
        let desired = json!({"spec": {"selector": {"tusk.dev/role": "primary"}}});
        let live = json!({"spec": {"selector": {"tusk.dev/role": "replica"}}});
        assert!(!is_subset(&desired, &live));
        let removed = json!({"spec": {}});
        assert!(!is_subset(&desired, &removed));
    }

    #[test]
    fn a_list_of_another_length_is_drift() {
        let desired = json!({"rules": [{"verbs": ["get"]}, {"verbs": ["create"]}]});
        let live = json!({"rules": [{"verbs": ["get"]}]});
        assert!(!is_subset(&desired, &live));
    }
}
