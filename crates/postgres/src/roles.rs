//! The database roles Tusk creates in every cluster.

/// The superuser the instance manager works as.
pub const SUPERUSER: &str = "postgres";

/// The role standbys stream as and `pg_rewind` connects as.
pub const REPLICATION: &str = "streaming_replica";

/// The application database and its owner when the spec names neither.
pub const DEFAULT_APP: &str = "app";
