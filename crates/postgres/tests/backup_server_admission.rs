//! pgBackRest's TLS server as the instance manager starts it
//! ([`server_args`]), run for real on loopback: it admits the backup
//! client's certificate and refuses the replication user's, although both
//! come from the same authority. A holder of the replication certificate
//! (which streams WAL) must not reach the pgBackRest remote, which runs the
//! commands its client sends and logs in to PostgreSQL as the superuser.
//!
//! The certificates are made with `openssl`; pgBackRest is Debian's
//! (`scripts/setup` installs both).

use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "common/authority.rs"]
mod authority;

use authority::{authority, issue};
use tusk_postgres::pgbackrest::{BACKUP_CLIENT, PROGRAM, TlsFiles, server_args};

const STANZA: &str = "orders";
/// Every certificate names the loopback address the server listens on.
const SANS: &str = "IP:127.0.0.1";

fn files(dir: &Path, name: &str) -> TlsFiles {
    let path = |file: String| dir.join(file).display().to_string();
    TlsFiles {
        cert_file: path(format!("{name}.crt")),
        key_file: path(format!("{name}.key")),
        ca_file: path("ca.crt".to_owned()),
    }
}

/// Stops the server however the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `pgbackrest check` of `STANZA` against the server at `port` with the
/// client certificate `client`: what it printed.
fn check_through(dir: &Path, port: u16, client: &TlsFiles) -> String {
    let output: Output = Command::new(PROGRAM)
        .args([
            format!("--config={}", dir.join("empty.conf").display()),
            format!("--log-path={}", dir.display()),
            format!("--stanza={STANZA}"),
            "--log-level-console=warn".to_owned(),
            "--pg1-host=127.0.0.1".to_owned(),
            "--pg1-host-type=tls".to_owned(),
            format!("--pg1-host-port={port}"),
            format!("--pg1-host-cert-file={}", client.cert_file),
            format!("--pg1-host-key-file={}", client.key_file),
            format!("--pg1-host-ca-file={}", client.ca_file),
            format!("--pg1-path={}", dir.join("data").display()),
            format!("--repo1-path={}", dir.join("repo").display()),
            "--io-timeout=5".to_owned(),
            "--db-timeout=5".to_owned(),
            "check".to_owned(),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("pgbackrest runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_backup_server_refuses_the_replication_certificate_and_admits_the_backup_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    authority(dir, "orders authority");
    issue(dir, "server", "orders-rw", SANS);
    issue(dir, "replication", tusk_postgres::roles::REPLICATION, SANS);
    issue(dir, "backup", BACKUP_CLIENT, SANS);
    std::fs::write(dir.join("empty.conf"), "").expect("config");
    std::fs::write(
        dir.join("server.conf"),
        format!("[{STANZA}]\npg1-path={}\n", dir.join("data").display()),
    )
    .expect("config");

    let port = free_port();
    let address = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let _server = Running(
        Command::new(PROGRAM)
            .arg(format!("--config={}", dir.join("server.conf").display()))
            .arg(format!("--log-path={}", dir.display()))
            .args(server_args(address, port, &files(dir, "server"), STANZA))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbackrest server starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect((address, port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the server did not listen within 15 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let replication = check_through(dir, port, &files(dir, "replication"));
    assert!(
        replication.contains("access denied"),
        "the replication certificate was not refused:\n{replication}"
    );
    // The backup client gets through to the remote, which then finds no
    // PostgreSQL here: any answer but a refusal shows it was admitted.
    let backup = check_through(dir, port, &files(dir, "backup"));
    assert!(
        !backup.contains("access denied") && backup.contains("socket"),
        "the backup client was not admitted:\n{backup}"
    );
}
