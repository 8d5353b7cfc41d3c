//! Where a failover's time goes, on the benchmark's own clock: the primary
//! lease, the cluster's status and the `-rw` Endpoints are watched, and
//! each change is stamped when it arrives, so a repetition's steps read as
//! offsets from the freeze.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Endpoints;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tusk_api::v1alpha1::PostgresCluster;

/// One change, as it arrived.
#[derive(Clone, Debug)]
enum Change {
    /// The lease's holder, at a new version (a renewal or a takeover).
    Lease { holder: Option<String> },
    /// The status' chosen and serving primaries.
    Status {
        target: Option<String>,
        current: Option<String>,
    },
    /// The pods `-rw` routes to.
    Routes { ready: Vec<String> },
}

/// Every change seen since [`Timeline::start`].
pub struct Timeline {
    changes: Arc<Mutex<Vec<(Instant, Change)>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The steps of one failover, each as time since the freeze (a negative
/// offset: before it).
pub struct Steps {
    /// The last renewal of the old primary's lease that arrived.
    pub renewed: f64,
    /// The old primary no longer among `-rw`'s ready addresses.
    pub unrouted: Option<f64>,
    /// The operator chose the new primary (`status.targetPrimary`).
    pub decided: Option<f64>,
    /// The new primary's manager holds the lease.
    pub taken: Option<f64>,
    /// The operator saw it serve (`status.currentPrimary`).
    pub promoted: Option<f64>,
    /// `-rw` routes to it alone.
    pub routed: Option<f64>,
    /// The client's first acknowledged write after the decision (a hung
    /// primary's backends may acknowledge some after the fault).
    pub written: Option<f64>,
}

impl Steps {
    /// The steps in order, named, for printing and for the summary.
    pub fn named(&self) -> [(&'static str, Option<f64>); 7] {
        [
            ("lease last renewed", Some(self.renewed)),
            ("old primary unrouted", self.unrouted),
            ("new primary chosen", self.decided),
            ("lease taken over", self.taken),
            ("promotion seen", self.promoted),
            ("-rw routes to it", self.routed),
            ("first write on it", self.written),
        ]
    }
}

impl Timeline {
    /// Starts watching the lease, the status and the Endpoints of
    /// `cluster` in `namespace`.
    pub fn start(client: &Client, namespace: &str, cluster: &str) -> Self {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let lease: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), namespace);
        let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
        let tasks = vec![
            follow(
                lease,
                &tusk_api::primacy::lease_name(cluster),
                &changes,
                |l| Change::Lease {
                    holder: l.spec.as_ref().and_then(|s| s.holder_identity.clone()),
                },
            ),
            follow(clusters, cluster, &changes, |c| {
                let status = c.status.clone().unwrap_or_default();
                Change::Status {
                    target: status.target_primary,
                    current: status.current_primary,
                }
            }),
            follow(endpoints, &format!("{cluster}-rw"), &changes, |e| {
                let ready = e
                    .subsets
                    .iter()
                    .flatten()
                    .flat_map(|s| s.addresses.iter().flatten())
                    .filter_map(|a| a.target_ref.as_ref().and_then(|t| t.name.clone()))
                    .collect();
                Change::Routes { ready }
            }),
        ];
        Timeline { changes, tasks }
    }

    /// The steps of the failover from `old` to `new` that began with the
    /// fault at `frozen`; `first_ack_after` says when the client's first
    /// write after a moment was acknowledged.
    pub fn steps(
        &self,
        frozen: Instant,
        old: &str,
        new: &str,
        first_ack_after: impl Fn(Instant) -> Option<Instant>,
    ) -> Steps {
        let changes = self.changes.lock().map(|c| c.clone()).unwrap_or_default();
        let offset = |at: Instant| {
            if at >= frozen {
                (at - frozen).as_secs_f64()
            } else {
                -(frozen - at).as_secs_f64()
            }
        };
        let first = |wanted: &dyn Fn(&Change) -> bool| {
            changes
                .iter()
                .find(|(at, change)| *at >= frozen && wanted(change))
                .map(|(at, _)| *at)
        };
        let after = |wanted: &dyn Fn(&Change) -> bool| first(wanted).map(offset);
        let chosen = |c: &Change| matches!(c, Change::Status { target, .. } if target.as_deref() == Some(new));
        let held_by = |change: &Change, name: &str| matches!(change, Change::Lease { holder } if holder.as_deref() == Some(name));
        let renewed = changes
            .iter()
            .take_while(|(at, change)| *at < frozen || !held_by(change, new))
            .filter(|(_, change)| held_by(change, old))
            .last()
            .map_or(f64::NAN, |(at, _)| offset(*at));
        Steps {
            renewed,
            unrouted: after(
                &|c| matches!(c, Change::Routes { ready } if !ready.iter().any(|r| r == old)),
            ),
            decided: after(&chosen),
            taken: after(&|c| held_by(c, new)),
            promoted: after(
                &|c| matches!(c, Change::Status { current, .. } if current.as_deref() == Some(new)),
            ),
            routed: after(&|c| matches!(c, Change::Routes { ready } if ready == &[new.to_owned()])),
            written: first(&chosen).and_then(first_ack_after).map(offset),
        }
    }

    /// Stops watching.
    pub fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Records every version of the object `name` that `api` delivers, as
/// `describe` reads it, stamped on arrival.
fn follow<K>(
    api: Api<K>,
    name: &str,
    changes: &Arc<Mutex<Vec<(Instant, Change)>>>,
    describe: fn(&K) -> Change,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let changes = changes.clone();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut objects = watcher(api, config)
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(object) = objects.next().await {
            let Ok(object) = object else { continue };
            let change = describe(&object);
            if let Ok(mut changes) = changes.lock() {
                changes.push((Instant::now(), change));
            }
        }
    })
}

/// Prints each step's offset from the freeze over the repetitions.
pub fn summary(runs: &[Steps]) {
    let Some(first) = runs.first() else { return };
    for (index, (name, _)) in first.named().iter().enumerate() {
        let mut values: Vec<f64> = runs
            .iter()
            .filter_map(|s| s.named()[index].1)
            .filter(|v| v.is_finite())
            .collect();
        if values.is_empty() {
            println!("  {name:<22} never seen");
            continue;
        }
        values.sort_by(f64::total_cmp);
        println!(
            "  {name:<22} median {:+6.2} s   min {:+6.2} s   max {:+6.2} s",
            values[values.len() / 2],
            values[0],
            values[values.len() - 1]
        );
    }
}
