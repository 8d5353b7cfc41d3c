//! Writing status, last (`CONTRIBUTING.md`, 7): composes it from a pass's
//! [`StatusInput`] and outcome, writes it when it changed (R9), and
//! publishes an Event for each phase transition and failure (R22).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster, PostgresClusterStatus};

use crate::apply::FIELD_MANAGER;
use crate::context::Context;
use crate::error::{Error, ErrorCategory};
use crate::events::publish_all;
use crate::freshness::cluster_key;
use crate::note::Note;
use crate::status::{self, StatusInput};

/// What [`write`] left on the cluster.
pub struct Written {
    pub status: PostgresClusterStatus,
    /// The cluster's resourceVersion after the write (or as read, when
    /// nothing changed).
    pub version: Option<String>,
}

/// Composes the status from `input` and the pass's `failure`, writes it
/// if it changed, and says so in events.
pub async fn write(
    cluster: &PostgresCluster,
    ctx: &Context,
    input: &StatusInput<'_>,
    failure: Option<&Error>,
) -> Result<Written, Error> {
    // A failure of the pass says more than a refusal the pass worked
    // around (see [`crate::reconcile`]): that one comes back next pass.
    let failure = failure
        .map(|e| (e.category(), e.to_string()))
        .or_else(|| input.failure.clone());
    let input = StatusInput {
        failure: failure.clone(),
        ..input.clone()
    };
    let previous = cluster.status.as_ref();
    let new = PostgresClusterStatus {
        selector: Some(tusk_api::labels::cluster_selector(&cluster.name_any())),
        ..status::compose(&input)
    };
    let Some(to_write) = status::to_write(previous, new.clone(), &input.now) else {
        return Ok(Written {
            status: new,
            version: cluster.resource_version(),
        });
    };
    let version = patch_status(cluster, ctx, &to_write).await?;
    let mut notes = notes(previous.and_then(|s| s.phase), new.phase, failure.as_ref());
    notes.extend(crate::archiving::notes(previous, &new));
    notes.extend(crate::archiving::recovery_notes(previous, &new));
    notes.extend(crate::scheduling::notes(previous, &new));
    publish_all(cluster, ctx, &notes).await;
    if previous.and_then(|s| s.observed_generation) != new.observed_generation
        && let Some(changed) = spec_changed_at(&cluster.metadata)
    {
        let seconds = input.now.0.duration_since(changed).as_secs_f64();
        ctx.metrics.generation_observed(seconds.max(0.0));
    }
    Ok(Written {
        status: new,
        version,
    })
}

/// Writes `status` with server-side apply. The version it was computed
/// from is a precondition: a status computed from an older cluster is
/// refused (409), never written over a newer decision (see
/// [`crate::freshness`]).
async fn patch_status(
    cluster: &PostgresCluster,
    ctx: &Context,
    status: &PostgresClusterStatus,
) -> Result<Option<String>, Error> {
    let api: Api<PostgresCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let version = cluster.resource_version();
    let body = json!({
        "apiVersion": PostgresCluster::api_version(&()),
        "kind": PostgresCluster::kind(&()),
        "metadata": {"resourceVersion": version},
        "status": status,
    });
    let written = api
        .patch_status(
            &cluster.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(Error::kube("write status"))?;
    let written = written.resource_version();
    ctx.freshness.replaced(
        &cluster_key(cluster),
        version.as_deref(),
        written.as_deref(),
    );
    Ok(written)
}

/// The events a written status calls for: a phase transition, a failure.
fn notes(
    old: Option<ClusterPhase>,
    new: Option<ClusterPhase>,
    failure: Option<&(ErrorCategory, String)>,
) -> Vec<Note> {
    let name = |phase: Option<ClusterPhase>| phase.map_or("none", ClusterPhase::as_str);
    let transition = (old != new).then(|| {
        Note::normal(
            "PhaseChanged",
            format!("phase {} -> {}", name(old), name(new)),
        )
    });
    let failed =
        failure.map(|(category, message)| Note::warning(category.reason(), message.clone()));
    transition.into_iter().chain(failed).collect()
}

/// When the API server recorded the last change of the spec: the newest
/// time among the main resource's managedFields entries that own spec
/// fields (whole seconds), else the creation time.
pub fn spec_changed_at(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| owns_spec(entry))
        .filter_map(|entry| entry.time.as_ref().map(|t| t.0))
        .max()
        .or_else(|| meta.creation_timestamp.as_ref().map(|t| t.0))
}

/// A managedFields entry of the main resource that owns spec fields.
fn owns_spec(entry: &ManagedFieldsEntry) -> bool {
    entry.subresource.as_deref().unwrap_or_default().is_empty()
        && entry
            .fields_v1
            .as_ref()
            .is_some_and(|fields| fields.0.get("f:spec").is_some())
}

/// Keeps of the managedFields only what [`spec_changed_at`] reads: the
/// newest entry that owns spec fields, reduced to its time. Every status
/// write adds to the managedFields, so the whole list would be most of a
/// cached cluster.
pub fn keep_spec_change_only(meta: &mut ObjectMeta) {
    let Some(entries) = meta.managed_fields.take() else {
        return;
    };
    let newest = entries
        .into_iter()
        .filter(owns_spec)
        .max_by_key(|entry| entry.time.as_ref().map(|t| t.0));
    meta.managed_fields = newest.map(|entry| {
        vec![ManagedFieldsEntry {
            time: entry.time,
            fields_type: entry.fields_type,
            fields_v1: Some(FieldsV1(json!({"f:spec": {}}))),
            ..ManagedFieldsEntry::default()
        }]
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(entries: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(json!({
            "name": "orders",
            "creationTimestamp": "2026-01-01T10:00:00Z",
            "managedFields": entries,
        }))
        .expect("metadata")
    }

    fn at(text: &str) -> Option<Timestamp> {
        text.parse().ok()
    }

    #[test]
    fn a_spec_change_is_timed_from_its_write_not_from_creation() {
        let edited = meta(json!([
            {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:instances": {}}}},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-01-01T11:30:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:storage": {}}}},
            // Status and metadata-only writes come later and do not count.
            {"manager": "tusk-operator", "operation": "Apply", "time": "2026-01-01T11:31:00Z",
             "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
            {"manager": "kube-rs", "operation": "Update", "time": "2026-01-01T11:32:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:finalizers": {}}}},
        ]));
        assert_eq!(spec_changed_at(&edited), at("2026-01-01T11:30:00Z"));
    }

    #[test]
    fn a_trimmed_cache_entry_keeps_the_time_of_the_last_spec_change() {
        let mut edited = meta(json!([
            {"manager": "kubectl", "operation": "Update", "time": "2026-01-01T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:instances": {}}}},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-01-01T11:30:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:storage": {}}}},
            {"manager": "tusk-operator", "operation": "Apply", "time": "2026-01-01T11:31:00Z",
             "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
        ]));
        keep_spec_change_only(&mut edited);
        assert_eq!(edited.managed_fields.as_ref().map(Vec::len), Some(1));
        assert_eq!(spec_changed_at(&edited), at("2026-01-01T11:30:00Z"));
    }

    #[test]
    fn without_field_management_the_creation_time_counts() {
        assert_eq!(
            spec_changed_at(&meta(json!([]))),
            at("2026-01-01T10:00:00Z")
        );
    }

    #[test]
    fn a_written_status_says_its_phase_change_and_failure() {
        use ClusterPhase::*;
        let refused = Error::Refused("storage may grow but never shrink".into());
        let failure = (refused.category(), refused.to_string());
        let notes = notes(Some(Ready), Some(Degraded), Some(&failure));
        let said: Vec<(&str, bool)> = notes
            .iter()
            .map(|n| (n.reason.as_str(), n.warning))
            .collect();
        assert_eq!(said, [("PhaseChanged", false), ("RefusedChange", true)]);
        assert_eq!(notes[0].text, "phase Ready -> Degraded");
        assert!(super::notes(Some(Ready), Some(Ready), None).is_empty());
        assert_eq!(
            super::notes(None, Some(Pending), None)[0].text,
            "phase none -> Pending"
        );
    }
}
