//! Deployments and ReplicaSets: the selector never changes.

use serde_json::Value;

use super::KindRules;
use crate::apiserver::admission::workloads;
use crate::apiserver::error::Cause;

pub struct Workload;

impl KindRules for Workload {
    fn updated(&self, old: &Value, object: &mut Value, status: bool, causes: &mut Vec<Cause>) {
        if !status {
            workloads::update(old, object, causes);
        }
    }
}
