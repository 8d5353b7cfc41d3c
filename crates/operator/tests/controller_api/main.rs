//! The controller against a real API server (the sandbox's, without a
//! kubelet), like envtest: children and ownership, zero-write convergence,
//! drift repair, permanent and transient errors, leader election, deletion
//! policies and restarts (R7-R16).

mod children;
mod failover;
mod instances;
mod ownership;
mod permissions;
mod resilience;
mod rollout;
mod spec_changes;
mod support;
mod volumes;
