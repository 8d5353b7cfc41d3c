//! PostgreSQL knowledge with no Kubernetes in it: configuration rendering,
//! WAL positions, version rules. It lives in `tusk-postgres`, shared with
//! the operator and the API; these paths are kept for the instance
//! manager's modules.

pub use tusk_postgres::{config, lsn, synchronous, version};
