//! The sandbox API server through real clients: kube-rs for the API
//! semantics, and the machine's kubectl for what kubectl needs.
//!
//! Every test starts its own server on a free port with a temporary data
//! directory, so tests run in parallel and leave nothing behind.

mod common;

mod controller;
mod crds;
mod crud;
mod defaults;
mod faults;
mod kubectl;
mod kubectl_protobuf;
mod kubectl_scale;
mod kubectl_tables;
mod lifecycle;
mod metadata_only;
mod partitions;
mod patch;
mod pod_identity;
mod pod_proxy;
mod rbac;
mod rbac_escalation;
mod rbac_kubectl;
mod rbac_support;
mod tokens;
mod watch;
