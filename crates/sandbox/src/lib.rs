//! A local Kubernetes-compatible control plane for one machine.

pub mod converge;
pub mod endpoints;
mod informer;
pub mod kubelet;
pub mod node;
pub mod proxy;
