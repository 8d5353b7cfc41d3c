//! The built-in controllers: what Kubernetes's controller manager would do
//! for the kinds the operator relies on.
//!
//! [`gc`] runs inside the API server process on its storage (owner
//! references, namespace deletion, a deleted CRD's objects); [`endpoints`],
//! [`deployment`] and [`replicaset`] run beside the node through a client,
//! as kube-controller-manager's do.

pub mod deployment;
pub mod endpoints;
pub mod gc;
pub mod replicaset;
