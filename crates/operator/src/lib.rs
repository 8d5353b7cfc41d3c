//! The PostgresCluster controller.
//!
//! Reconcile is a pipeline (see `CONTRIBUTING.md` and [`reconcile`]): fetch the
//! children and instance reports, [`validate`] the spec once into a
//! [`validate::ValidatedCluster`] and check it against what was observed,
//! [`reconcile::Plan`] every decision purely ([`plan`], [`failover`],
//! [`switchover`]), apply it with the pure [`builders`] and server-side
//! apply in a fixed order, and write status last ([`report`], from the pure
//! [`status`] and [`phase`]). Only fetch, apply and report touch the API;
//! every pure module is unit tested with inline objects.

pub mod absent;
pub mod apply;
pub mod archiving;
pub mod backups;
pub mod builders;
pub mod cached_cluster;
pub mod children;
pub mod cleanup;
pub mod config;
pub mod context;
pub mod controller;
pub mod error;
pub mod events;
pub mod expectations;
pub mod failover;
pub mod freshness;
pub mod install;
pub mod instance_api;
pub mod leader;
pub mod metrics;
pub mod names;
pub mod note;
pub mod observe;
pub mod packed;
pub mod phase;
pub mod plan;
pub mod primacy;
pub mod reconcile;
pub mod rehearsal;
pub mod report;
pub mod retry;
pub mod rollout;
pub mod run;
pub mod scheduling;
pub mod server;
pub mod status;
pub mod switchover;
pub mod upgrade;
pub mod validate;
pub mod webhook;
