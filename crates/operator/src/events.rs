//! Events for people (R22): what the operator decided or could not do,
//! on the cluster. A failure to publish is logged, never fatal: events are
//! for people, the status is the record.

use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::events::{Event, EventType, Recorder};
use tusk_api::v1alpha1::PostgresCluster;

use crate::context::Context;
use crate::error::ErrorCategory;
use crate::note::Note;

/// Publishes `notes` on the cluster, in order, and logs them.
pub async fn publish_all(cluster: &PostgresCluster, ctx: &Context, notes: &[Note]) {
    for note in notes {
        if note.warning {
            tracing::warn!(reason = %note.reason, note = %note.text, "event");
        } else {
            tracing::info!(reason = %note.reason, note = %note.text, "event");
        }
        publish(ctx, &cluster.object_ref(&()), note).await;
    }
}

/// Publishes one note on the object `regarding`.
pub async fn publish(ctx: &Context, regarding: &ObjectReference, note: &Note) {
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    let event = Event {
        type_: if note.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: note.reason.clone(),
        note: Some(note.text.clone()),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, regarding).await {
        tracing::warn!(%error, "could not publish an event");
    }
}

/// A cluster object that does not match this operator's types: nothing
/// can be done with it until it is fixed, so say so, on the object, once
/// per change of it.
pub async fn report_undecodable(invalid: &InvalidObject, ctx: &Context) {
    let meta = &invalid.metadata;
    let name = meta.name.clone().unwrap_or_default();
    tracing::warn!(cluster = %name, namespace = ?meta.namespace, error = %invalid.error, "cannot read the PostgresCluster");
    ctx.metrics
        .reconciled(Instant::now(), Some(ErrorCategory::InvalidSpec));
    let reference = ObjectReference {
        api_version: Some(PostgresCluster::api_version(&()).into_owned()),
        kind: Some(PostgresCluster::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    };
    let note = Note::warning(
        ErrorCategory::InvalidSpec.reason(),
        format!("this operator cannot read the object: {}", invalid.error),
    );
    publish(ctx, &reference, &note).await;
}
