//! A cache of one kind of object plus a "something changed" signal, for the
//! node-side controllers (claims, endpoints, proxy) that recompute their
//! whole desired state whenever anything they read changes.
//!
//! The sandbox holds few objects, so recomputing everything from a
//! kube-rs reflector's store is simpler than tracking single changes and
//! cannot miss one.

use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The cache, the change counter, and the task feeding them (aborted on
/// drop).
pub struct Informer<K: Resource + 'static>
where
    K::DynamicType: Hash + Eq,
{
    pub store: Store<K>,
    pub changes: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Hash + Eq + Clone,
{
    pub fn start(api: Api<K>) -> Self {
        let (store, writer) = reflector::store();
        let (sender, changes) = watch::channel(0u64);
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                    Ok(_) => sender.send_modify(|n| *n += 1),
                    Err(error) => tracing::debug!(%error, "watch interrupted; resuming"),
                }
            }
        });
        Self {
            store,
            changes,
            task,
        }
    }
}

impl<K: Resource + 'static> Drop for Informer<K>
where
    K::DynamicType: Hash + Eq,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}
