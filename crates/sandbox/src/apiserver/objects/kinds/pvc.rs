//! PersistentVolumeClaims: what may change after creation.

use serde_json::Value;

use super::KindRules;
use crate::apiserver::admission::defaults;
use crate::apiserver::error::Cause;

pub struct PersistentVolumeClaim;

impl KindRules for PersistentVolumeClaim {
    fn updated(&self, old: &Value, object: &mut Value, status: bool, causes: &mut Vec<Cause>) {
        if !status {
            defaults::pvc_update(old, object, causes);
        }
    }
}
