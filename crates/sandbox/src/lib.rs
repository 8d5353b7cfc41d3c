//! A local Kubernetes-compatible control plane for one machine.
//!
//! No cluster is at hand on a laptop or in CI, yet the operator must run
//! and be tested for real. This crate is `tusk sandbox`: an API server
//! with Kubernetes semantics over HTTPS on 127.0.0.1, stored in SQLite, so
//! kube-rs and kubectl work against it unchanged, and the node side that
//! runs pods and Services on this machine ([`kubelet`], [`node`],
//! [`proxy`], [`endpoints`]). Where the API server does not implement
//! something, it answers with a clear error; it never pretends to succeed.
//!
//! API server request flow: [`server`] (TLS, token) -> [`handlers`] (routing, verbs)
//! -> [`objects`] (rules every write follows) -> [`admission`] (decoding,
//! defaults, schemas, CEL) -> [`storage`] (SQLite, resourceVersion,
//! history) -> [`watch`]. Beside them: [`discovery`] and [`openapi`] for
//! clients, [`table`] for kubectl's columns, [`patch`] and [`apply`] for
//! PATCH bodies and field ownership, [`gc`] for the built-in controllers,
//! [`crds`] for custom kinds, and [`faults`] for tests.

pub mod admission;
pub mod apply;
pub mod client;
pub mod converge;
pub mod crds;
pub mod defaults;
pub mod discovery;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod faults;
pub mod gc;
pub mod handlers;
mod informer;
pub mod kubelet;
pub mod node;
pub mod objects;
pub mod openapi;
pub mod patch;
pub mod proxy;
pub mod resources;
pub mod routing;
pub mod selectors;
pub mod server;
pub mod storage;
pub mod table;
pub mod tls;
pub mod watch;

pub use faults::{Failure, Faults};
pub use server::{Config, Sandbox, ServerError};
