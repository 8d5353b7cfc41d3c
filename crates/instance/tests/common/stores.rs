//! The object stores of the tests, started for one test and stopped when
//! dropped: the S3-compatible server of `scripts/s3-test-server` (moto),
//! the GCS server of `scripts/gcs-test-server` (gcp-storage-emulator) and
//! the Azure Blob server of `scripts/azure-test-server`, all over HTTPS
//! on loopback with a CA of their own.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tusk_api::contract::{KeyService, RepositoryKeys};
use tusk_api::pgbackrest::Repository;

/// How long a server may take to start (Python imports the emulator,
/// makes keys).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the S3 server printed when it was ready.
#[derive(serde::Deserialize, Debug)]
pub struct Served {
    pub host: String,
    pub port: u16,
    pub ca_file: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

/// A test server's process (stopped when dropped) and its directory.
struct Launched {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `scripts/<script>` with `buckets`, listening on `listen`
/// (loopback when `None`), and waits (bounded) for its ready line, parsed.
fn launch<T: serde::de::DeserializeOwned>(
    script: &str,
    buckets: &[&str],
    listen: Option<std::net::IpAddr>,
) -> (Launched, T) {
    let dir = tempfile::Builder::new()
        .prefix("tusk-store-")
        .tempdir()
        .expect("temporary directory");
    // pgBackRest, run as the PostgreSQL user, reads the CA in it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../scripts/{script}"));
    let mut command = Command::new(path);
    command.arg("--dir").arg(dir.path());
    for bucket in buckets {
        command.arg("--bucket").arg(bucket);
    }
    if let Some(listen) = listen {
        command.arg("--listen").arg(listen.to_string());
    }
    // Standard input stays open while the test runs: the server stops
    // when it closes, even if the test process dies.
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("scripts/{script} starts (scripts/setup installs what it needs): {e}")
        });
    let stdout = child.stdout.take().expect("stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    let launched = Launched { child, _dir: dir };
    let line = match receiver.recv_timeout(START_TIMEOUT) {
        Ok(line) if !line.trim().is_empty() => line,
        other => panic!("scripts/{script} did not start within {START_TIMEOUT:?}: {other:?}"),
    };
    let served = serde_json::from_str(&line).expect("the server's ready line");
    (launched, served)
}

pub struct S3Server {
    _process: Launched,
    pub served: Served,
}

impl S3Server {
    /// Starts the server with `buckets` on loopback and waits (bounded)
    /// until it serves.
    pub fn start(buckets: &[&str]) -> Self {
        Self::start_listening(buckets, None)
    }

    /// As [`S3Server::start`], listening on `listen` (loopback when
    /// `None`), e.g. the gateway of the sandbox's Docker network, where
    /// pods in containers reach it.
    pub fn start_listening(buckets: &[&str], listen: Option<std::net::IpAddr>) -> Self {
        let (process, served) = launch("s3-test-server", buckets, listen);
        S3Server {
            _process: process,
            served,
        }
    }

    /// The repository in `bucket` under `prefix`, trusting the server's CA.
    pub fn repository(&self, bucket: &str, prefix: &str) -> Repository {
        self.repository_through(bucket, prefix, self.served.port)
    }

    /// [`S3Server::repository`] reached through `port` on loopback (a
    /// relay in front of the server).
    pub fn repository_through(&self, bucket: &str, prefix: &str, port: u16) -> Repository {
        Repository::s3(
            &format!("s3://{bucket}/{prefix}"),
            Some(&format!("https://{}:{port}", self.served.host)),
            Some(&self.served.region),
        )
        .expect("a valid repository")
        .with_ca_file(Some(self.served.ca_file.clone()))
    }

    /// Where the server listens.
    pub fn address(&self) -> std::net::SocketAddr {
        let ip = self
            .served
            .host
            .parse()
            .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
        std::net::SocketAddr::new(ip, self.served.port)
    }

    /// The key the server accepts.
    pub fn keys(&self) -> RepositoryKeys {
        RepositoryKeys::s3(
            self.served.access_key_id.clone(),
            self.served.secret_access_key.clone(),
        )
    }
}

/// What the GCS server printed when it was ready.
#[derive(serde::Deserialize, Debug)]
pub struct GcsServed {
    pub host: String,
    pub port: u16,
    pub ca_file: String,
    /// A service account's JSON key the server accepts (its token
    /// endpoint checks what pgBackRest signs with it).
    pub service_account_key: String,
}

pub struct GcsServer {
    _process: Launched,
    pub served: GcsServed,
}

impl GcsServer {
    /// Starts the server with `buckets`, listening on `listen` (loopback
    /// when `None`), and waits (bounded) until it serves.
    pub fn start_listening(buckets: &[&str], listen: Option<std::net::IpAddr>) -> Self {
        let (process, served) = launch("gcs-test-server", buckets, listen);
        GcsServer {
            _process: process,
            served,
        }
    }

    /// The repository in `bucket` under `prefix`, trusting the server's CA
    /// and signing in with its service account key.
    pub fn repository(&self, bucket: &str, prefix: &str) -> Repository {
        Repository::gcs(
            &format!("gs://{bucket}/{prefix}"),
            Some(&format!(
                "https://{}:{}",
                self.served.host, self.served.port
            )),
            None,
        )
        .expect("a valid repository")
        .with_ca_file(Some(self.served.ca_file.clone()))
        .with_gcs_key_file(Some(self.served.service_account_key.clone()))
    }

    /// The service account key file's text.
    pub fn key(&self) -> String {
        std::fs::read_to_string(&self.served.service_account_key).expect("the key file")
    }

    /// A key like [`GcsServer::key`] (the same account and token endpoint)
    /// with another private key (from `openssl genpkey`): what the server
    /// refuses.
    pub fn key_of_another_signer(&self) -> String {
        let generated = Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .output()
            .expect("openssl runs");
        assert!(generated.status.success(), "openssl genpkey");
        let mut account: serde_json::Value = serde_json::from_str(&self.key()).expect("a JSON key");
        account["private_key"] = String::from_utf8(generated.stdout).expect("PEM").into();
        account.to_string()
    }
}

/// What the Azure Blob server printed when it was ready.
#[derive(serde::Deserialize, Debug)]
pub struct AzureServed {
    pub host: String,
    pub port: u16,
    pub ca_file: String,
    /// The storage account it serves, and the shared key it checks every
    /// request's signature with.
    pub account: String,
    pub key: String,
}

pub struct AzureServer {
    _process: Launched,
    pub served: AzureServed,
}

impl AzureServer {
    /// Starts the server with `containers`, listening on `listen`
    /// (loopback when `None`), and waits (bounded) until it serves.
    pub fn start_listening(containers: &[&str], listen: Option<std::net::IpAddr>) -> Self {
        let (process, served) = launch("azure-test-server", containers, listen);
        AzureServer {
            _process: process,
            served,
        }
    }

    /// The repository in `container` under `prefix`, at the server
    /// (path-style), trusting its CA.
    pub fn repository(&self, container: &str, prefix: &str) -> Repository {
        Repository::azure(
            &format!("az://{container}/{prefix}"),
            Some(&format!(
                "https://{}:{}",
                self.served.host, self.served.port
            )),
            None,
        )
        .expect("a valid repository")
        .with_ca_file(Some(self.served.ca_file.clone()))
    }

    /// A shared key of the same form as the server's (base64 of 64
    /// bytes) that is not its: what the server refuses.
    pub const OTHER_KEY: &'static str =
        "b3RoZXIta2V5LW9mLXRoZS1zYW1lLWZvcm0tYnV0LW5vdC10aGUtc2VydmVycy1vd24tLS0tLS0tLS0tLS0tLQ==";

    /// The storage account and the key the server accepts.
    pub fn keys(&self) -> RepositoryKeys {
        RepositoryKeys {
            service: KeyService::Azure,
            access_key_id: self.served.account.clone(),
            secret_access_key: self.served.key.clone(),
        }
    }
}
