//! What every reconcile shares: the API client, settings, metrics and the
//! HTTP clients that poll instance managers.

use std::sync::Arc;

use kube::Client;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::Store;
use tusk_api::v1alpha1::PostgresBackup;

use crate::children::Stores;
use crate::config::OperatorConfig;
use crate::metrics::Metrics;

pub struct Context {
    pub client: Client,
    pub config: OperatorConfig,
    pub metrics: Arc<Metrics>,
    /// How instance managers are reached (see [`crate::instance_api`]).
    pub instances: crate::instance_api::InstanceClients,
    pub reporter: Reporter,
    pub stores: Stores,
    /// Every PostgresBackup watched (see [`crate::backups`]).
    pub backups: Store<PostgresBackup>,
    /// Consecutive failures per cluster, for the back-off.
    pub failures: crate::retry::Failures,
    /// Cluster versions our own writes replaced (see [`crate::freshness`]).
    pub freshness: crate::freshness::Freshness,
    /// When each primary lease version was first seen (see [`crate::primacy`]).
    pub leases: Arc<crate::primacy::LeaseObservations>,
    /// Instances created and not yet seen in the caches (see
    /// [`crate::expectations`]).
    pub expectations: crate::expectations::Expectations,
    /// Clusters rolling their pods for the operator's version alone (see
    /// [`crate::rollout::slots`]).
    pub rollout_slots: crate::rollout::slots::Slots,
    /// Objects read by name that a pass found absent (see
    /// [`crate::absent`]).
    pub absent: crate::absent::KnownAbsent,
}

impl Context {
    pub fn new(
        client: Client,
        config: OperatorConfig,
        metrics: Arc<Metrics>,
        stores: Stores,
        backups: Store<PostgresBackup>,
    ) -> Self {
        let config_limit = config.max_concurrent_upgrades;
        Self {
            client,
            config,
            metrics,
            instances: crate::instance_api::InstanceClients::default(),
            reporter: Reporter {
                controller: "tusk-operator".to_owned(),
                instance: std::env::var("POD_NAME").ok(),
            },
            stores,
            backups,
            failures: crate::retry::Failures::default(),
            freshness: crate::freshness::Freshness::default(),
            leases: Arc::default(),
            expectations: crate::expectations::Expectations::default(),
            rollout_slots: crate::rollout::slots::Slots::new(config_limit),
            absent: crate::absent::KnownAbsent::default(),
        }
    }
}
