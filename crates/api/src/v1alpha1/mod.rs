//! The `postgres.tusk.dev/v1alpha1` API.

mod backup;
mod cluster;
mod readings;
pub mod rules;
mod status;

pub use backup::*;
pub use cluster::*;
pub use status::*;
