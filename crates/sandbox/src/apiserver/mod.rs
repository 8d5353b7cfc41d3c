//! The API server: Kubernetes semantics over HTTPS on 127.0.0.1.
//!
//! Request flow: [`server`] (TLS) -> [`handlers`] ([`auth`]entication and
//! authorization, routing, verbs)
//! -> [`objects`] (rules every write follows) -> [`admission`] (decoding,
//! defaults, schemas, CEL) -> [`webhooks`] (validating admission webhooks,
//! on a dry run of the write) -> [`storage`] (SQLite, resourceVersion,
//! history) -> [`watch`]. Beside them: [`discovery`] and [`openapi`] for
//! clients, [`table`] for kubectl's columns, [`patch`] and [`apply`] for
//! PATCH bodies and field ownership, [`crds`] for custom kinds,
//! [`protobuf`] for Kubernetes protobuf bodies of built-in kinds, and
//! [`faults`] and [`partitions`] for tests, and [`fault_control`] to
//! inject them over HTTP.

pub mod admission;
pub mod apply;
pub mod auth;
pub mod crds;
pub mod discovery;
pub mod error;
pub mod events;
pub mod fault_control;
pub mod faults;
pub mod handlers;
pub mod kubelet_proxy;
pub mod objects;
pub mod openapi;
pub mod partial;
pub mod partitions;
pub mod patch;
pub mod protobuf;
pub mod resources;
pub mod routing;
pub mod selectors;
pub mod server;
pub mod state;
pub mod storage;
pub mod table;
pub mod tls;
pub mod watch;
pub mod webhooks;
