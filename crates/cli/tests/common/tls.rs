//! TLS for the tests' own PostgreSQL connections: the cluster's servers
//! accept no plain connection from the network. [`encrypted`] encrypts
//! without checking who answers, for tests about something else (with
//! tokio-postgres' default `sslmode=prefer`: a server built without SSL,
//! this machine's PostgreSQL 16, is reached in plain text);
//! `e2e_tls.rs` verifies the server with real libpq.

use tokio_postgres_rustls::MakeRustlsConnect;

/// Encrypted, the server not verified (as the sandbox's probes and pod
/// proxy reach pods, [`tusk_sandbox::unverified_tls`]).
pub fn encrypted() -> MakeRustlsConnect {
    MakeRustlsConnect::new(tusk_sandbox::unverified_tls::client_config().expect("TLS versions"))
}
