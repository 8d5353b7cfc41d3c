//! TLS for the tests' own PostgreSQL connections: the cluster's servers
//! accept no plain connection from the network. [`encrypted`] encrypts
//! without checking who answers, for tests about something else (with
//! tokio-postgres' default `sslmode=prefer`: a server built without SSL,
//! this machine's PostgreSQL 16, is reached in plain text);
//! `e2e_tls.rs` verifies the server with real libpq, with the helpers
//! below (psql, and the certificate a server presents).

use std::process::Command;

use k8s_openapi::api::core::v1::Secret;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Encrypted, the server not verified (as the sandbox's probes and pod
/// proxy reach pods, [`tusk_sandbox::unverified_tls`]).
pub fn encrypted() -> MakeRustlsConnect {
    MakeRustlsConnect::new(tusk_sandbox::unverified_tls::client_config().expect("TLS versions"))
}

/// The text under `key` of `secret`.
pub fn text(secret: &Secret, key: &str) -> String {
    let data = secret.data.clone().unwrap_or_default();
    String::from_utf8(
        data.get(key)
            .unwrap_or_else(|| panic!("key {key}"))
            .0
            .clone(),
    )
    .expect("UTF-8")
}

/// Runs `sql` with psql and the connection settings `conninfo`: its
/// output, or what it printed on failure.
pub fn psql(conninfo: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("psql")
        .args([conninfo, "-XAtc", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .map_err(|e| format!("psql cannot run: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The first certificate in `pem`, without line breaks.
pub fn first_certificate(pem: &str) -> Option<String> {
    let start = pem.find("-----BEGIN CERTIFICATE-----")?;
    let end = pem[start..].find("-----END CERTIFICATE-----")? + start;
    Some(pem[start..end].split_whitespace().collect())
}

/// The certificate the server at `address` presents, as `openssl
/// s_client` receives it after PostgreSQL's SSL request.
pub fn presented(address: &str) -> Option<String> {
    presented_at(&[
        "-starttls",
        "postgres",
        "-connect",
        &format!("{address}:5432"),
    ])
}

/// The certificate the instance API at `address` presents.
pub fn presented_by_api(address: &str) -> Option<String> {
    presented_at(&["-connect", &format!("{address}:8000")])
}

fn presented_at(args: &[&str]) -> Option<String> {
    let output = Command::new("openssl")
        .arg("s_client")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    first_certificate(&String::from_utf8_lossy(&output.stdout))
}
