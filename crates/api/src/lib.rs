//! The Tusk API: the public contract users declare.
//!
//! - [`v1alpha1`]: the `PostgresCluster` and `PostgresBackup` custom
//!   resources, their defaults and CEL validation rules.
//! - [`admission`]: the checks the API server applies to a manifest
//!   (structure, schema constraints, CEL rules), evaluated locally from the
//!   same generated CRDs.
//! - [`admission_review`]: `admission.k8s.io/v1` AdmissionReview, which
//!   the operator's webhook answers and the sandbox's API server sends.
//! - [`conditions`]: setting status conditions the Kubernetes way.
//! - [`instance`]: the instance manager's HTTP API (`/status`), shared by
//!   the operator and the instance manager.
//! - [`contract`]: what the pod the operator builds promises the instance
//!   manager inside it (environment, mounts, credentials).
//! - [`fencing`]: reading the fencing annotation.
//! - [`primacy`]: the primary lease that bounds split brain.
//! - [`labels`]: keys the operator owns; [`quantity`]: Kubernetes
//!   quantities as exact numbers.
//! - [`lsn`], [`parameters`]: re-exported from `tusk-postgres`, the one
//!   home of PostgreSQL knowledge, where they used to live.
//!
//! This crate does no I/O.

pub mod admission;
pub mod admission_review;
pub mod conditions;
pub mod contract;
pub mod fencing;
pub mod instance;
pub mod labels;
pub mod primacy;
pub mod quantity;
pub mod rehearsal;
pub mod time;
pub mod upgrade;
pub mod v1alpha1;

pub use tusk_postgres::{lsn, parameters, pgbackrest};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// API group of every Tusk resource.
pub const GROUP: &str = "postgres.tusk.dev";

/// The oldest Kubernetes minor version Tusk supports: the CRDs' CEL rules use
/// the quantity library and `messageExpression`, and kube-rs is built for it.
pub const MIN_KUBERNETES_VERSION: &str = "1.33";

/// Every CRD Tusk defines, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut cluster = v1alpha1::PostgresCluster::crd();
    v1alpha1::rules::declare_metadata_name(&mut cluster);
    vec![cluster, v1alpha1::PostgresBackup::crd()]
}
