//! The primary lease watch: every renewal is recorded as it arrives
//! ([`LeaseObservations::saw`]), and a lease whose holder stopped renewing
//! is handed to the controller within a renewal period and a half, so the
//! cluster is reconciled at once instead of when its pod turns unready.
//!
//! A quiet lease is only a reason to look: the reconcile still judges the
//! primary from its pod and its manager's answer, and the lease's last
//! renewal only dates the failure when the primary is found failing.
//!
//! Cost: one watch event per renewal (every fifth of the lease duration)
//! per cluster, kept as one small entry per lease, not as the object.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, future, stream};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, Event, watcher};
use kube::runtime::{WatchStreamExt, reflector::ObjectRef};
use kube::{Api, Client, ResourceExt};
use tusk_api::labels;
use tusk_api::primacy::LeaseTiming;

use super::LeaseObservations;
use crate::cached_cluster::CachedCluster;

/// How often quiet leases are looked for.
const TICK: Duration = Duration::from_millis(100);

/// The key of a lease in [`LeaseObservations`].
pub fn lease_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Primary leases (in `namespace`, or everywhere) as they go quiet, each
/// version once; every renewal on the way is recorded in `seen`. Watch
/// errors are passed on (the watch retries with back-off).
pub fn quiet_leases(
    client: &Client,
    namespace: Option<&str>,
    seen: Arc<LeaseObservations>,
) -> impl Stream<Item = Result<Lease, watcher::Error>> + Send + 'static {
    let api: Api<Lease> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let recorder = seen.clone();
    let renewals = watcher(api, watcher::Config::default().labels(labels::CLUSTER))
        .default_backoff()
        .filter_map(move |event| {
            future::ready(match event {
                Ok(event) => {
                    record(&recorder, event);
                    None
                }
                Err(error) => Some(Err(error)),
            })
        });
    let ticks = stream::unfold(tokio::time::interval(TICK), |mut interval| async move {
        interval.tick().await;
        Some(((), interval))
    });
    let quiet = ticks.flat_map(move |()| {
        let keys = seen.newly_quiet(Instant::now());
        stream::iter(keys.into_iter().filter_map(|key| placeholder(&key)).map(Ok))
    });
    stream::select(renewals, quiet)
}

/// The cluster a primary lease belongs to.
pub fn cluster_of(lease: &Lease) -> Option<ObjectRef<CachedCluster>> {
    let cluster = lease.labels().get(labels::CLUSTER)?;
    let namespace = lease.namespace()?;
    Some(ObjectRef::new(cluster).within(&namespace))
}

fn record(seen: &LeaseObservations, event: Event<Lease>) {
    let now = Instant::now();
    match event {
        Event::Apply(lease) | Event::InitApply(lease) => {
            let (Some(namespace), Some(version)) = (lease.namespace(), lease.resource_version())
            else {
                return;
            };
            let spec = lease.spec.as_ref();
            let held = spec
                .and_then(|s| s.holder_identity.as_deref())
                .is_some_and(|h| !h.is_empty());
            let timing = spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u32::try_from(s).ok())
                .filter(|_| held)
                .map(LeaseTiming::for_duration);
            seen.saw(
                &lease_key(&namespace, &lease.name_any()),
                &version,
                timing,
                now,
            );
        }
        Event::Delete(lease) => {
            if let Some(namespace) = lease.namespace() {
                seen.forget(&lease_key(&namespace, &lease.name_any()));
            }
        }
        Event::Init | Event::InitDone => {}
    }
}

/// A lease with only what [`cluster_of`] reads, for a key that went quiet:
/// the cluster is the lease's name without its suffix.
fn placeholder(key: &str) -> Option<Lease> {
    let (namespace, name) = key.split_once('/')?;
    let cluster = tusk_api::primacy::cluster_of_lease(name)?;
    Some(Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                labels::CLUSTER.to_owned(),
                cluster.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_lease_names_its_cluster() {
        let lease = placeholder("db-ns/orders-primary").expect("a primary lease");
        let cluster = cluster_of(&lease).expect("labelled");
        assert_eq!(cluster.name, "orders");
        assert_eq!(cluster.namespace.as_deref(), Some("db-ns"));
        assert!(placeholder("no-namespace").is_none());
        assert!(placeholder("ns/not-a-primary-lease").is_none());
    }
}
