//! PostgreSQL knowledge with no Kubernetes in it: configuration rendering,
//! WAL positions, version rules.

pub mod config;
pub mod lsn;
pub mod version;
