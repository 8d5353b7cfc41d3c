//! The built-in controllers: what Kubernetes's controller manager would do
//! for the kinds the operator relies on.
//!
//! [`gc`] (owner references, namespace deletion, a deleted CRD's objects),
//! [`root_ca`] (the `kube-root-ca.crt` ConfigMaps) and
//! [`kubernetes_service`] (the `kubernetes` Service, reconciled at start)
//! run inside the API server process on its storage; [`endpoints`],
//! [`deployment`], [`replicaset`] and [`node_lifecycle`] run beside the
//! node through a client, as kube-controller-manager's do.

pub mod deployment;
pub mod endpoints;
pub mod gc;
pub mod kubernetes_service;
pub mod node_lifecycle;
pub mod replicaset;
pub mod root_ca;
