//! The `postgres.tusk.dev/v1alpha1` API.

mod backup;
mod cluster;
mod exposure;
mod readings;
mod roles;
pub mod rules;
mod status;

pub use backup::*;
pub use cluster::*;
pub use exposure::*;
pub use roles::*;
pub use status::*;
