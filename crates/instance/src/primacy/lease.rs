//! The primary lease through the Kubernetes API: read it, and write it
//! with optimistic concurrency (every write names the version it replaces,
//! so two managers never both believe they took it).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::decide::{Intent, Seen, Step, decide};

/// What a round left the manager with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The write went through: the lease is held from the moment the
    /// request was sent.
    Held,
    /// Not held (released, or another instance holds it).
    NotHeld,
}

/// One lease, as this manager sees it.
pub struct LeaseClient {
    api: Api<Lease>,
    name: String,
    /// The cluster the lease belongs to, as its label says: the operator
    /// watches the primary leases by that label.
    cluster: String,
    me: String,
    /// The lease as this manager last wrote it: a renewal needs no read.
    written: Option<Lease>,
    /// The version last read and since when it stood unchanged.
    observed: Option<(String, Instant)>,
}

impl LeaseClient {
    pub fn new(api: Api<Lease>, cluster: &str, me: String) -> Self {
        LeaseClient {
            api,
            name: tusk_api::primacy::lease_name(cluster),
            cluster: cluster.to_owned(),
            me,
            written: None,
            observed: None,
        }
    }

    /// Reads the lease if needed, decides, and writes.
    pub async fn round(&mut self, intent: &Intent) -> Result<Outcome, kube::Error> {
        let lease = match self.written.take() {
            Some(lease) if intent.hold => Some(lease),
            _ => self.api.get_opt(&self.name).await?,
        };
        let seen = lease.as_ref().map(|l| self.seen(l));
        match decide(&self.me, intent, seen.as_ref()) {
            Step::Create => {
                let lease = self.fresh(intent, None, true);
                let created = self.api.create(&PostParams::default(), &lease).await?;
                self.written = Some(created);
                Ok(Outcome::Held)
            }
            Step::Write { acquire, .. } => {
                let lease = self.fresh(intent, lease, acquire);
                let written = self
                    .api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await?;
                if acquire {
                    tracing::info!(lease = %self.name, "primary lease acquired");
                }
                self.written = Some(written);
                Ok(Outcome::Held)
            }
            Step::Release { .. } => {
                let mut lease = lease.unwrap_or_default();
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = None;
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await?;
                tracing::info!(lease = %self.name, "primary lease released");
                Ok(Outcome::NotHeld)
            }
            Step::Wait | Step::Idle => Ok(Outcome::NotHeld),
        }
    }

    /// Forget the written copy (a write was refused: read again).
    pub fn forget(&mut self) {
        self.written = None;
    }

    fn seen(&mut self, lease: &Lease) -> Seen {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let now = Instant::now();
        let since = match &self.observed {
            Some((seen, since)) if *seen == version => *since,
            _ => {
                self.observed = Some((version.clone(), now));
                now
            }
        };
        let spec = lease.spec.as_ref();
        Seen {
            version,
            holder: spec.and_then(|s| s.holder_identity.clone()),
            duration: Duration::from_secs(
                spec.and_then(|s| s.lease_duration_seconds)
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(0),
            ),
            unchanged_for: now.duration_since(since),
        }
    }

    /// `base` (or a new lease) held by this instance, renewed now.
    fn fresh(&self, intent: &Intent, base: Option<Lease>, acquire: bool) -> Lease {
        let mut lease = base.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        // Leases written before the label existed get it at their next renewal.
        lease
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(tusk_api::labels::CLUSTER.to_owned(), self.cluster.clone());
        let now = MicroTime(Timestamp::now());
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.me.clone());
        spec.lease_duration_seconds = Some(intent.timing.duration_seconds());
        spec.renew_time = Some(now.clone());
        if acquire {
            spec.acquire_time = Some(now);
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        lease
    }
}
