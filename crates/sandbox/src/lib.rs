//! A local Kubernetes-compatible control plane for one machine.
//!
//! No cluster is at hand on a laptop or in CI, yet the operator must run
//! and be tested for real. This crate is `tusk sandbox`: an API server
//! with Kubernetes semantics over HTTPS on 127.0.0.1, stored in SQLite, so
//! kube-rs and kubectl work against it unchanged, and the node side that
//! runs pods and Services on this machine. Where the API server does not
//! implement something, it answers with a clear error; it never pretends
//! to succeed.
//!
//! The folders are the parts of a cluster:
//! - [`apiserver`]: HTTP, authentication, the verbs, admission, storage,
//!   watch, apply, discovery and the per-kind rules of the write path;
//! - [`controllers`]: garbage collection, namespace deletion and
//!   endpoints, which Kubernetes runs in its controller manager;
//! - [`node`]: the kubelet that runs pods as local processes or Docker
//!   containers, and the Service proxy; it also joins a control plane the
//!   sandbox did not start (`Node::join`, `tusk sandbox node`).
//!
//! Beside them: [`sandbox`] assembles and starts the API server and its
//! controllers, [`client`] connects to a running sandbox (and
//! [`fault_client`] injects faults into it), `https` serves a router over
//! TLS for the API server and the kubelet, [`converge`]
//! applies manifests and says what has not converged yet, [`yaml11`]
//! reads manifests as kubectl does (YAML 1.1's booleans and numbers), and
//! [`testing`] is the harness tests use to start a sandbox and wait on
//! conditions.

pub mod apiserver;
pub mod client;
pub mod controllers;
pub mod converge;
pub mod fault_client;
mod https;
mod informer;
pub mod node;
mod procfs;
pub mod sandbox;
pub mod testing;
pub mod unverified_tls;
pub mod yaml11;

pub use apiserver::faults::{Failure, Faults};
pub use sandbox::{Config, Sandbox, ServerError};
// Paths other crates use, kept from before the folders.
pub use node::kubelet;
pub use sandbox as server;
