//! CustomResourceDefinitions: checked, reported Established, guarded by
//! the cleanup finalizer, and served as soon as they are stored.

use serde_json::{Value, json};

use super::KindRules;
use crate::apiserver::crds;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::objects::meta::{meta_mut, now, str_at};
use crate::apiserver::state::Api;
use crate::apiserver::storage::Transaction;

pub struct CustomResourceDefinition;

impl KindRules for CustomResourceDefinition {
    fn created(
        &self,
        _tx: &Transaction<'_>,
        name: &str,
        now: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        let causes = crds::validate(object);
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                "CustomResourceDefinition.apiextensions.k8s.io",
                name,
                causes,
            ));
        }
        object["status"] = crds::established_status(object, now);
        let finalizers = meta_mut(object)
            .entry("finalizers")
            .or_insert_with(|| json!([]));
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == crds::CLEANUP_FINALIZER)
        {
            list.push(json!(crds::CLEANUP_FINALIZER));
        }
        Ok(())
    }

    fn updated(&self, old: &Value, object: &mut Value, status: bool, causes: &mut Vec<Cause>) {
        if status {
            return;
        }
        causes.extend(crds::validate_update(Some(old), object));
        if str_at(object, "/spec/group") != str_at(old, "/spec/group") {
            causes.push(Cause::invalid(
                "spec.group",
                "Invalid value: field is immutable",
            ));
        }
        if causes.is_empty() {
            object["status"] = crds::established_status(object, &now());
        }
    }

    fn stored(&self, api: &Api, object: &Value) {
        if let Some(served) = crds::resource(object) {
            api.registry.insert(served);
        }
    }

    fn removed(&self, api: &Api, object: &Value) {
        if let Some(served) = crds::served_key(object) {
            api.registry.remove(&served);
        }
    }
}
