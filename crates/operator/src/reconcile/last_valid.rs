//! Which spec a pass converges to: the declared one when it is valid,
//! else the last valid one on record (`status.lastValidSpec`).
//!
//! The API server admits specs the controller refuses (a parameter value
//! PostgreSQL would not start with, a storage shrink past an older CRD).
//! Refusing such a spec must not stop the operator caring for a running
//! cluster: a pod lost meanwhile would never come back. So a refused spec
//! is reported (the refusal names the field and the rule) and nothing of
//! it is applied, while the pass maintains the cluster as the last valid
//! spec declared it. The record is in status, so a restarted operator
//! finds it; it is validated again before use, and a cluster without a
//! usable record (one that was never valid) is left as it is.
//!
//! Only `spec.paused` is taken from a refused spec: a person who pauses
//! the cluster while the spec is wrong means the operator to stop acting.

use kube::ResourceExt;
use tusk_api::v1alpha1::{LastValidSpec, PostgresCluster};

use super::fetch::Observed;
use super::validate::validate;
use crate::config::OperatorConfig;
use crate::error::Error;
use crate::status::StatusInput;
use crate::validate::ValidatedCluster;

/// What a pass converges to.
#[derive(Debug)]
pub struct Target {
    /// The cluster as the pass sees it: the live object, with the spec
    /// and generation of the spec it converges to.
    pub cluster: PostgresCluster,
    pub valid: ValidatedCluster,
    /// Why the declared spec is refused, when the pass keeps the last
    /// valid one instead.
    pub refused: Option<Refusal>,
}

/// A declared spec refused, and the generation kept instead.
#[derive(Debug)]
pub struct Refusal {
    pub error: Error,
    /// The generation of the last valid spec, which the pass maintains.
    pub kept: i64,
}

impl Refusal {
    /// What status and events say: the refusal, then what is kept.
    pub fn message(&self) -> String {
        format!(
            "{}; nothing of this change is applied: the cluster is kept as its last valid spec \
             (generation {}) declares it until the spec is fixed",
            self.error, self.kept
        )
    }
}

impl Target {
    /// Tells the pass's status what was chosen: the declared generation
    /// was observed (refused or not), the record to leave, the refusal.
    pub fn describe(&self, status: &mut StatusInput<'_>, declared: &PostgresCluster) {
        status.generation = declared.metadata.generation;
        status.valid_spec = self.record();
        status.failure = self
            .refused
            .as_ref()
            .map(|r| (r.error.category(), r.message()));
    }

    /// The record this pass leaves in `status.lastValidSpec`: the
    /// declared spec, when it is the one converged to; `None` keeps the
    /// record as it is.
    pub fn record(&self) -> Option<LastValidSpec> {
        if self.refused.is_some() {
            return None;
        }
        let spec = serde_json::to_value(&self.cluster.spec).ok()?;
        Some(LastValidSpec {
            generation: self.cluster.metadata.generation?,
            spec,
        })
    }
}

/// Decides the spec a pass converges to. Fails with the declared spec's
/// refusal when there is no valid spec to keep instead.
pub fn choose(
    cluster: &PostgresCluster,
    config: &OperatorConfig,
    observed: &Observed,
) -> Result<Target, Error> {
    let error = match validate(cluster, config, observed) {
        Ok(valid) => {
            return Ok(Target {
                cluster: cluster.clone(),
                valid,
                refused: None,
            });
        }
        Err(error) => error,
    };
    let Some((kept, generation)) = recorded(cluster) else {
        return Err(error);
    };
    match validate(&kept, config, observed) {
        Ok(valid) => Ok(Target {
            cluster: kept,
            valid,
            refused: Some(Refusal {
                error,
                kept: generation,
            }),
        }),
        Err(unusable) => {
            tracing::warn!(cluster = %cluster.name_any(), %unusable, "the last valid spec on record is no longer valid; nothing is maintained");
            Err(error)
        }
    }
}

/// The cluster as its recorded last valid spec declares it (with the
/// declared `paused`), and that spec's generation; `None` without a
/// record that reads as a spec.
fn recorded(cluster: &PostgresCluster) -> Option<(PostgresCluster, i64)> {
    let record = cluster.status.as_ref()?.last_valid_spec.as_ref()?;
    let mut spec = match record.read() {
        Ok(spec) => spec,
        Err(error) => {
            tracing::warn!(cluster = %cluster.name_any(), %error, "the last valid spec on record does not read as a spec");
            return None;
        }
    };
    spec.paused = cluster.spec.paused;
    let mut kept = cluster.clone();
    kept.spec = spec;
    kept.metadata.generation = Some(record.generation);
    Some((kept, record.generation))
}

#[cfg(test)]
mod tests;
