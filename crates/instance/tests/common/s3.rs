//! The S3-compatible server of `scripts/s3-test-server` (moto over HTTPS
//! on loopback, with a CA of its own), started for one test and stopped
//! when dropped.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tusk_api::contract::RepositoryKeys;
use tusk_api::pgbackrest::Repository;

/// How long the server may take to start (Python imports moto, makes keys).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the server printed when it was ready.
#[derive(serde::Deserialize, Debug)]
pub struct Served {
    pub host: String,
    pub port: u16,
    pub ca_file: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

pub struct S3Server {
    child: Child,
    pub served: Served,
    _dir: tempfile::TempDir,
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
        let dir = tempfile::Builder::new()
            .prefix("tusk-s3-")
            .tempdir()
            .expect("temporary directory");
        // pgBackRest, run as the PostgreSQL user, reads the CA in it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/s3-test-server");
        let mut command = Command::new(script);
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
            .expect("scripts/s3-test-server starts (scripts/setup installs moto)");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = match receiver.recv_timeout(START_TIMEOUT) {
            Ok(line) if !line.trim().is_empty() => line,
            other => {
                let _ = child.kill();
                panic!("the S3 test server did not start within {START_TIMEOUT:?}: {other:?}");
            }
        };
        let served: Served = serde_json::from_str(&line).expect("the server's ready line");
        S3Server {
            child,
            served,
            _dir: dir,
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
        RepositoryKeys {
            access_key_id: self.served.access_key_id.clone(),
            secret_access_key: self.served.secret_access_key.clone(),
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
