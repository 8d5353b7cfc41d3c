//! Prometheus metrics of the operator (R20), exposed on `/metrics`.
//!
//! Labels are stable, closed sets (error categories, phases, results), never
//! free text, so series do not multiply.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use kube::runtime::reflector::Store;
use tusk_api::conditions;
use tusk_api::v1alpha1::{ClusterPhase, PostgresCluster};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::cached_cluster::CachedCluster;
use crate::error::ErrorCategory;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    condition: &'static str,
    status: &'static str,
}

/// The condition types counted per cluster: the operator's own.
const CONDITION_TYPES: &[&str] = &[
    conditions::READY,
    conditions::PROGRESSING,
    conditions::DEGRADED,
    conditions::FAILOVER_BLOCKED,
    conditions::UNSUPPORTED,
    tusk_api::conditions::PRIMARY_AVAILABLE,
    tusk_api::conditions::RESTORE_REHEARSED,
    tusk_api::conditions::LAST_BACKUP_RECENT,
];

fn phase_label(phase: Option<ClusterPhase>) -> &'static str {
    phase.map_or("None", ClusterPhase::as_str)
}

/// Every metric the operator exports.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_seconds: Histogram,
    errors: Family<CategoryLabels, Counter>,
    clusters_by_phase: Family<PhaseLabels, Gauge>,
    clusters_by_condition: Family<ConditionLabels, Gauge>,
    /// The controller's cache of clusters, counted at each scrape.
    clusters: OnceLock<Store<CachedCluster>>,
    generation_observed_seconds: Histogram,
    instance_poll_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("tusk_operator");
        let reconciles = Family::<ResultLabels, Counter>::default();
        let reconcile_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let errors = Family::<CategoryLabels, Counter>::default();
        let clusters_by_phase = Family::<PhaseLabels, Gauge>::default();
        let clusters_by_condition = Family::<ConditionLabels, Gauge>::default();
        let generation_observed_seconds = Histogram::new(exponential_buckets(0.01, 2.0, 16));
        let instance_poll_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register("reconciles", "Reconciles by result", reconciles.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile takes",
            reconcile_seconds.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles by error category",
            errors.clone(),
        );
        registry.register(
            "clusters",
            "PostgresClusters by phase",
            clusters_by_phase.clone(),
        );
        registry.register(
            "clusters_by_condition",
            "PostgresClusters by condition type and status",
            clusters_by_condition.clone(),
        );
        registry.register(
            "generation_observed_seconds",
            "Time from each spec change, as the API server recorded it (managedFields time, whole seconds), to status.observedGeneration reaching its generation",
            generation_observed_seconds.clone(),
        );
        registry.register(
            "instance_poll_duration_seconds",
            "Time to read one instance manager's status",
            instance_poll_seconds.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            reconciles,
            reconcile_seconds,
            errors,
            clusters_by_phase,
            clusters_by_condition,
            clusters: OnceLock::new(),
            generation_observed_seconds,
            instance_poll_seconds,
        }
    }
}

impl Metrics {
    /// Records a finished reconcile.
    pub fn reconciled(&self, started: Instant, error: Option<ErrorCategory>) {
        self.reconcile_seconds
            .observe(started.elapsed().as_secs_f64());
        let result = if error.is_some() { "error" } else { "success" };
        self.reconciles
            .get_or_create(&ResultLabels { result })
            .inc();
        if let Some(category) = error {
            self.errors
                .get_or_create(&CategoryLabels {
                    category: category.reason(),
                })
                .inc();
        }
    }

    /// Counts clusters from the controller's cache at every scrape, so the
    /// gauges are right after a restart and never drift.
    pub fn count_clusters_of(&self, store: Store<CachedCluster>) {
        let _ = self.clusters.set(store);
    }

    /// Sets the by-phase and by-condition gauges from `clusters`.
    pub fn count_clusters<'a>(&self, clusters: impl Iterator<Item = &'a PostgresCluster>) {
        self.clusters_by_phase.clear();
        self.clusters_by_condition.clear();
        for cluster in clusters {
            self.count_cluster(cluster);
        }
    }

    fn count_cluster(&self, cluster: &PostgresCluster) {
        let status = cluster.status.as_ref();
        self.clusters_by_phase
            .get_or_create(&PhaseLabels {
                phase: phase_label(status.and_then(|s| s.phase)),
            })
            .inc();
        for condition in status.map(|s| s.conditions.as_slice()).unwrap_or_default() {
            let Some(type_) = CONDITION_TYPES.iter().find(|t| **t == condition.type_) else {
                continue;
            };
            let status = match condition.status.as_str() {
                "True" => "True",
                "False" => "False",
                _ => "Unknown",
            };
            self.clusters_by_condition
                .get_or_create(&ConditionLabels {
                    condition: type_,
                    status,
                })
                .inc();
        }
    }

    pub fn generation_observed(&self, seconds: f64) {
        self.generation_observed_seconds.observe(seconds);
    }

    pub fn instance_polled(&self, started: Instant) {
        self.instance_poll_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        if let Some(store) = self.clusters.get() {
            // Decoded one at a time: the cache holds them encoded.
            self.clusters_by_phase.clear();
            self.clusters_by_condition.clear();
            for cached in store.state() {
                if let Ok(cluster) = cached.unpack().0 {
                    self.count_cluster(&cluster);
                }
            }
        }
        let mut out = String::new();
        let registry = match self.registry.lock() {
            Ok(registry) => registry,
            Err(poisoned) => poisoned.into_inner(),
        };
        if encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_and_errors_are_counted_by_closed_labels() {
        let metrics = Metrics::default();
        metrics.reconciled(Instant::now(), None);
        metrics.reconciled(Instant::now(), Some(ErrorCategory::Throttled));
        let cluster: PostgresCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "a"},
            "spec": {"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}},
            "status": {"phase": "Ready", "conditions": [
                {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                 "lastTransitionTime": "2026-12-02T10:00:00Z"},
                {"type": "SomethingElse", "status": "True", "reason": "X", "message": "",
                 "lastTransitionTime": "2026-12-02T10:00:00Z"}
            ]}
        }))
        .expect("cluster");
        metrics.count_clusters([&cluster].into_iter());
        let text = metrics.encode();
        assert!(
            text.contains("tusk_operator_reconciles_total{result=\"success\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tusk_operator_reconcile_errors_total{category=\"Throttled\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tusk_operator_clusters{phase=\"Ready\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "tusk_operator_clusters_by_condition{condition=\"Ready\",status=\"True\"} 1"
            ),
            "{text}"
        );
        assert!(!text.contains("SomethingElse"), "{text}");
        assert!(
            text.contains("tusk_operator_reconcile_duration_seconds_count 2"),
            "{text}"
        );
    }
}
