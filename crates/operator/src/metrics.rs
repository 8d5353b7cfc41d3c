//! Prometheus metrics of the operator (R20), exposed on `/metrics`.
//!
//! Labels are stable, closed sets (error categories, phases, results), never
//! free text, so series do not multiply.

use std::sync::Mutex;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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

/// Every metric the operator exports.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_seconds: Histogram,
    errors: Family<CategoryLabels, Counter>,
    clusters_by_phase: Family<PhaseLabels, Gauge>,
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
            "generation_observed_seconds",
            "Time from a spec change to the status observing it",
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

    /// Moves one cluster from `from` to `to` in the by-phase gauge.
    pub fn phase_changed(&self, from: Option<&'static str>, to: Option<&'static str>) {
        if let Some(phase) = from {
            self.clusters_by_phase
                .get_or_create(&PhaseLabels { phase })
                .dec();
        }
        if let Some(phase) = to {
            self.clusters_by_phase
                .get_or_create(&PhaseLabels { phase })
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
        metrics.phase_changed(None, Some("Ready"));
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
            text.contains("tusk_operator_reconcile_duration_seconds_count 2"),
            "{text}"
        );
    }
}
