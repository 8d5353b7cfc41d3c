//! Watches: a stream of ADDED / MODIFIED / DELETED events from a
//! resourceVersion, with bookmarks on request, 410 Gone once the requested
//! version is older than the retained history, and `timeoutSeconds`.
//!
//! A watch with a selector sees an object enter (ADDED) and leave (DELETED)
//! the selection when a change makes it match or stop matching, as on
//! Kubernetes. A watch that falls too far behind the live feed is ended; the
//! client resumes from its last resourceVersion.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::apiserver::error::ApiError;
use crate::apiserver::partial;
use crate::apiserver::resources::Resource;
use crate::apiserver::selectors::{FieldSelector, LabelSelector};
use crate::apiserver::state::Api;
use crate::apiserver::storage::{Change, EventType};
use crate::apiserver::table;

pub struct WatchRequest {
    pub resource: Resource,
    pub version: String,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// `None`: start with the current state as ADDED events.
    pub resource_version: Option<u64>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Duration,
    /// `Some(includeObject)` when the client asked for Table rows.
    pub table: Option<String>,
    /// `Some(apiVersion)` when the client asked for PartialObjectMetadata.
    pub partial: Option<&'static str>,
    /// Core Events shown as `events.k8s.io/v1`.
    pub events_v1: bool,
}

impl WatchRequest {
    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(&self.resource.kind, object)
    }

    fn encode(&self, type_: &str, object: &Value) -> Bytes {
        let mut object = if self.events_v1 {
            crate::apiserver::events::to_events_v1(object)
        } else {
            let mut object = object.clone();
            object["apiVersion"] = json!(self.resource.api_version(&self.version));
            object
        };
        if let Some(include) = &self.table {
            object = table::render(&self.resource, &self.version, &[object], json!({}), include);
        } else if let Some(api_version) = self.partial {
            object = partial::object(&object, api_version);
        }
        let mut line = json!({"type": type_, "object": object}).to_string();
        line.push('\n');
        Bytes::from(line)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let api_version = if self.events_v1 {
            "events.k8s.io/v1".to_owned()
        } else {
            self.resource.api_version(&self.version)
        };
        let object = json!({
            "kind": self.resource.kind,
            "apiVersion": api_version,
            "metadata": metadata,
        });
        let mut line = json!({"type": "BOOKMARK", "object": object}).to_string();
        line.push('\n');
        Bytes::from(line)
    }

    /// The event this watcher sees for a change, if any.
    fn translate(&self, change: &Change) -> Option<Bytes> {
        if change.key.resource != self.resource.key {
            return None;
        }
        if let Some(ns) = &self.namespace
            && change.key.namespace != *ns
        {
            return None;
        }
        let now = self.matches(&change.object);
        let before = change.previous.as_ref().map(|p| self.matches(p));
        let type_ = match (change.type_, now, before) {
            (EventType::Added, true, _) => EventType::Added,
            (EventType::Modified, true, Some(true)) => EventType::Modified,
            (EventType::Modified, true, _) => EventType::Added,
            (EventType::Modified, false, Some(true)) => EventType::Deleted,
            (EventType::Deleted, _, Some(true)) => EventType::Deleted,
            (EventType::Deleted, true, None) => EventType::Deleted,
            _ => return None,
        };
        Some(self.encode(type_.as_str(), &change.object))
    }
}

pub fn stream(
    api: Arc<Api>,
    request: WatchRequest,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>>, ApiError> {
    let storage = |e: crate::apiserver::storage::StorageError| ApiError::internal(e);
    let mut initial = Vec::new();
    let mut backlog = Vec::new();
    let (start_rv, live) = match request.resource_version {
        None | Some(0) => {
            let (rv, items, live) = api
                .store
                .snapshot_and_subscribe(&request.resource.key, request.namespace.as_deref())
                .map_err(storage)?;
            initial = items;
            (rv, Some(live))
        }
        Some(rv) => match api.store.subscribe(rv).map_err(storage)? {
            Some(subscription) => {
                backlog = subscription.backlog;
                (rv, Some(subscription.live))
            }
            None => (rv, None),
        },
    };
    let mut closer = api.faults.watch_closer();
    closer.mark_unchanged();
    let bookmark_interval = api.config.bookmark_interval;
    Ok(async_stream::stream! {
        let Some(mut live) = live else {
            let gone = ApiError::Gone {
                message: format!("too old resource version: {start_rv}"),
            };
            let mut line = json!({"type": "ERROR", "object": gone.status()}).to_string();
            line.push('\n');
            yield Ok(Bytes::from(line));
            return;
        };
        let mut last_rv = start_rv;
        for object in &initial {
            if request.matches(object) {
                yield Ok(request.encode("ADDED", object));
            }
        }
        if request.send_initial_events && request.bookmarks {
            yield Ok(request.bookmark(last_rv, true));
        }
        for change in &backlog {
            last_rv = last_rv.max(change.rv);
            if let Some(event) = request.translate(change) {
                yield Ok(event);
            }
        }
        let deadline = tokio::time::sleep(request.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = closer.changed() => break,
                _ = ticker.tick(), if request.bookmarks => {
                    yield Ok(request.bookmark(last_rv, false));
                }
                received = live.recv() => match received {
                    Ok(change) => {
                        if change.rv <= last_rv {
                            continue;
                        }
                        last_rv = change.rv;
                        if let Some(event) = request.translate(&change) {
                            yield Ok(event);
                        }
                    }
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => break,
                },
            }
        }
    })
}
