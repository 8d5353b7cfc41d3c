//! The PostgresCluster controller.
//!
//! Reconcile is a pipeline (see `STYLE.md`): fetch the cluster and its
//! children, [`validate`] the spec once into a [`validate::ValidatedCluster`],
//! [`plan`] the next safe step (pure), build the desired children with the
//! pure [`builders`], apply them with server-side apply in a fixed order, and
//! compute status last ([`phase`]). Only fetch, apply and status touch the
//! API; everything in this crate's pure modules is unit tested with inline
//! objects.

pub mod apply;
pub mod builders;
pub mod children;
pub mod cleanup;
pub mod config;
pub mod context;
pub mod controller;
pub mod error;
pub mod failover;
pub mod freshness;
pub mod install;
pub mod leader;
pub mod metrics;
pub mod names;
pub mod observe;
pub mod phase;
pub mod plan;
pub mod reconcile;
pub mod retry;
pub mod run;
pub mod server;
pub mod status;
pub mod switchover;
pub mod validate;
