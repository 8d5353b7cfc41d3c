//! The cluster's certificates in an instance: from the mounted Secrets
//! (`<cluster>-server`, `<cluster>-replication-cert`,
//! `<cluster>-backup-client-cert`, and the public half of
//! `<cluster>-api-token-key`, see
//! [`tusk_api::contract::TlsSecret`]) to private copies in the run
//! directory that PostgreSQL and libpq accept, and a TLS connector for the
//! manager's own connections to other instances.
//!
//! PostgreSQL refuses a private key that others can read, and a mounted
//! Secret's files belong to root with the mode the pod gives them; libpq
//! refuses the same for a client key. So the manager copies the files,
//! readable by the PostgreSQL user alone, on every tick: a Secret renewed
//! by the operator reaches the copies within the kubelet's refresh and
//! PostgreSQL at its next reload, with no restart and no dropped session.
//!
//! With the owner's own server certificate mounted too
//! (`spec.certificates.serverSecret`, under
//! [`tusk_api::contract::POSTGRES_TLS_MOUNT`]), PostgreSQL serves that one
//! and instances verify one another against its authority; client
//! certificates (replication) and the instance API stay the cluster's.
//!
//! With no server certificate mounted (an instance manager run on its own,
//! outside a pod), or a PostgreSQL built without SSL ([`build_has_ssl`]),
//! TLS is off and connections are plain.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tusk_api::contract::{
    CA_KEY, POSTGRES_TLS_MOUNT, TLS_CERT_KEY, TLS_KEY_KEY, TOKEN_PUBLIC_KEY, TlsSecret,
};
use tusk_postgres::config::{ClientTls, ServerTls};
use tusk_postgres::pgbackrest::TlsFiles;

use crate::process_user::{ProcessUser, ProcessUserError};

/// Whether the PostgreSQL programs in `bin_dir` were built with SSL, as
/// `pg_config --configure` says (`--with-openssl`, or `--with-ssl=` since
/// PostgreSQL 14). A server built without it refuses `ssl = on` and would
/// not start. Without `pg_config` the build is taken to have it, as every
/// distribution's does.
pub fn build_has_ssl(bin_dir: &Path) -> bool {
    let Ok(output) = std::process::Command::new(bin_dir.join("pg_config"))
        .arg("--configure")
        .output()
    else {
        return true;
    };
    if !output.status.success() {
        return true;
    }
    configured_with_ssl(&String::from_utf8_lossy(&output.stdout))
}

/// Whether the libpq that the programs in `bin_dir` load knows the
/// connection option `require_auth` (libpq 16 and later): `psql` is asked
/// to parse it, and an older libpq answers `invalid connection option`.
/// Without `psql` it is taken not to: an option libpq does not know
/// fails every connection (the walreceiver's included), a missing one only
/// loses a second guard.
pub fn libpq_has_require_auth(bin_dir: &Path) -> bool {
    let Ok(output) = std::process::Command::new(bin_dir.join("psql"))
        .args([
            "-X",
            "-w",
            "-d",
            "host=/nonexistent require_auth=none",
            "-c",
            "",
        ])
        .stdin(std::process::Stdio::null())
        .output()
    else {
        return false;
    };
    !String::from_utf8_lossy(&output.stderr).contains("invalid connection option")
}

/// Whether configure flags as `pg_config --configure` prints them name SSL.
fn configured_with_ssl(flags: &str) -> bool {
    flags
        .split_whitespace()
        .map(|flag| flag.trim_matches('\''))
        .any(|flag| flag == "--with-openssl" || flag.starts_with("--with-ssl="))
}

/// A certificate that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the mounted certificate file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the mounted certificate file {path} is not PEM: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("cannot use the cluster's certificates: {0}")]
    Rustls(#[from] rustls::Error),
    #[error(transparent)]
    Copy(#[from] ProcessUserError),
}

/// The files of the two mounted Secrets, as read, and of the owner's own
/// server certificate when the pod mounts one.
#[derive(Clone, PartialEq, Eq)]
pub struct Mounted {
    /// The cluster's server certificate: PostgreSQL's unless the owner
    /// gave one, and always the instance API's.
    server_cert: String,
    server_key: String,
    /// The cluster's authority: client certificates (replication) and the
    /// API's tokens are checked against it.
    ca: String,
    client_cert: String,
    client_key: String,
    /// The backup client's certificate and key, which pgBackRest's TLS
    /// server admits (absent in a pod made before it existed: the
    /// replication certificate stands in, which only such a pod's
    /// primary admits).
    backup_client: Option<[String; 2]>,
    /// The public key `/status` tokens are checked against (absent in a
    /// pod made before it existed: the authority's certificate then).
    token_key: Option<String>,
    /// The owner's server certificate, key and authority
    /// (`spec.certificates.serverSecret`).
    own: Option<[String; 3]>,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mounted(<certificates>)")
    }
}

/// Where the private copies are (under the run directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    dir: PathBuf,
}

impl Installed {
    pub fn in_run_dir(run_dir: &Path) -> Self {
        Installed {
            dir: run_dir.join("tls"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn text(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// The server's files, for `postgresql.conf` (`ca.crt`: the cluster's
    /// authority, which replication's client certificates chain to).
    pub fn server(&self) -> ServerTls {
        ServerTls {
            cert_file: self.text("server.crt"),
            key_file: self.text("server.key"),
            ca_file: self.text("ca.crt"),
        }
    }

    /// The replication user's files, for libpq; the server is verified
    /// against the authority of the certificate PostgreSQL serves
    /// (`server-ca.crt`: the owner's, or the cluster's) and for
    /// `server_name`; `require_auth` when the local libpq knows it
    /// ([`libpq_has_require_auth`]).
    pub fn client(&self, server_name: String, require_auth: bool) -> ClientTls {
        ClientTls {
            cert_file: self.text("replication.crt"),
            key_file: self.text("replication.key"),
            root_cert_file: self.text("server-ca.crt"),
            server_name,
            require_auth,
        }
    }

    /// pgBackRest's TLS server ([`crate::backup_server`]): the cluster's
    /// server certificate always (the owner's names the Services, not the
    /// pods), and the cluster's authority, which the replication user's
    /// client certificate chains to.
    pub fn backup_server(&self) -> TlsFiles {
        TlsFiles {
            cert_file: self.text("backup-server.crt"),
            key_file: self.text("backup-server.key"),
            ca_file: self.text("ca.crt"),
        }
    }

    /// A standby's backup as the client of its primary's pgBackRest
    /// server: the backup client's certificate, the server verified
    /// against the cluster's authority.
    pub fn backup_client(&self) -> TlsFiles {
        TlsFiles {
            cert_file: self.text("backup-client.crt"),
            key_file: self.text("backup-client.key"),
            ca_file: self.text("ca.crt"),
        }
    }

    /// Writes the copies that differ from `mounted`, readable by `user`
    /// alone; true when any changed.
    pub fn install(&self, mounted: &Mounted, user: &ProcessUser) -> Result<bool, TlsError> {
        user.private_dir(&self.dir)?;
        let [cert, key, server_ca] = mounted.postgres();
        let [backup_cert, backup_key] = match &mounted.backup_client {
            Some([cert, key]) => [cert.as_str(), key.as_str()],
            None => [mounted.client_cert.as_str(), mounted.client_key.as_str()],
        };
        Ok(user.private_files([
            (self.path("server.crt"), cert),
            (self.path("server.key"), key),
            (self.path("server-ca.crt"), server_ca),
            (self.path("backup-server.crt"), mounted.server_cert.as_str()),
            (self.path("backup-server.key"), mounted.server_key.as_str()),
            (self.path("ca.crt"), mounted.ca.as_str()),
            (self.path("replication.crt"), mounted.client_cert.as_str()),
            (self.path("replication.key"), mounted.client_key.as_str()),
            (self.path("backup-client.crt"), backup_cert),
            (self.path("backup-client.key"), backup_key),
        ])?)
    }
}

impl Mounted {
    /// Reads the mounted Secrets under `secrets_dir`; `None` when no
    /// server certificate is mounted.
    pub fn read(secrets_dir: &Path) -> Result<Option<Self>, TlsError> {
        let (Some(server), Some(client)) = (
            TlsSecret::Server.mounted_dir(secrets_dir),
            TlsSecret::Replication.mounted_dir(secrets_dir),
        ) else {
            return Ok(None);
        };
        if !server.join(TLS_CERT_KEY).exists() {
            return Ok(None);
        }
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path).map_err(|source| TlsError::Read { path, source })
        };
        let own = secrets_dir.join(POSTGRES_TLS_MOUNT);
        let own = if own.join(TLS_CERT_KEY).exists() {
            Some([
                read(own.join(TLS_CERT_KEY))?,
                read(own.join(TLS_KEY_KEY))?,
                read(own.join(CA_KEY))?,
            ])
        } else {
            None
        };
        let backup_client = match TlsSecret::BackupClient.mounted_dir(secrets_dir) {
            Some(dir) if dir.join(TLS_CERT_KEY).exists() => {
                Some([read(dir.join(TLS_CERT_KEY))?, read(dir.join(TLS_KEY_KEY))?])
            }
            _ => None,
        };
        let token_key = match TlsSecret::TokenPublicKey.mounted_dir(secrets_dir) {
            Some(dir) if dir.join(TOKEN_PUBLIC_KEY).exists() => {
                Some(read(dir.join(TOKEN_PUBLIC_KEY))?)
            }
            _ => None,
        };
        Ok(Some(Mounted {
            server_cert: read(server.join(TLS_CERT_KEY))?,
            server_key: read(server.join(TLS_KEY_KEY))?,
            ca: read(server.join(CA_KEY))?,
            client_cert: read(client.join(TLS_CERT_KEY))?,
            client_key: read(client.join(TLS_KEY_KEY))?,
            backup_client,
            token_key,
            own,
        }))
    }

    /// What PostgreSQL serves: certificate, key, and the authority it
    /// chains to (the owner's when given, else the cluster's).
    fn postgres(&self) -> [&str; 3] {
        match &self.own {
            Some([cert, key, ca]) => [cert, key, ca],
            None => [&self.server_cert, &self.server_key, &self.ca],
        }
    }

    /// Whether the cluster's server certificate names `address` (an IP
    /// address SAN): pgBackRest's client verifies its server by the
    /// address it connects to, a pod's.
    pub fn server_names(&self, address: std::net::IpAddr) -> bool {
        let Some(Ok(der)) = CertificateDer::pem_slice_iter(self.server_cert.as_bytes()).next()
        else {
            return false;
        };
        let Ok(parsed) = rustls::server::ParsedCertificate::try_from(&der) else {
            return false;
        };
        let name = rustls::pki_types::ServerName::IpAddress(address.into());
        rustls::client::verify_server_name(&parsed, &name).is_ok()
    }

    /// What tokens for the HTTP API are checked against
    /// ([`crate::api_tls`]), PEM: the token key's public half, or in a pod
    /// made before there was one, the authority's certificate.
    pub fn token_key_pem(&self) -> &str {
        self.token_key.as_deref().unwrap_or(&self.ca)
    }

    /// The HTTP API's server side: the cluster's server certificate, no
    /// client certificate asked for (the operator proves itself with a
    /// token, see `tusk_api::instance::TOKEN_HEADER`).
    pub fn api_server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let chain = CertificateDer::pem_slice_iter(self.server_cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_error(&e.to_string(), TLS_CERT_KEY))?;
        let key = PrivateKeyDer::from_pem_slice(self.server_key.as_bytes())
            .map_err(|e| pem_error(&e.to_string(), TLS_KEY_KEY))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?)
    }

    /// A connector for the manager's connections to other instances: it
    /// trusts the authority of the certificate PostgreSQL serves alone
    /// and logs in with the replication user's certificate.
    pub fn connector(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, TlsError> {
        let pem = pem_error;
        let mut roots = rustls::RootCertStore::empty();
        let [_, _, server_ca] = self.postgres();
        for ca in CertificateDer::pem_slice_iter(server_ca.as_bytes()) {
            let ca = ca.map_err(|e| pem(&e.to_string(), CA_KEY))?;
            roots.add(ca)?;
        }
        let chain = CertificateDer::pem_slice_iter(self.client_cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem(&e.to_string(), TLS_CERT_KEY))?;
        let key = PrivateKeyDer::from_pem_slice(self.client_key.as_bytes())
            .map_err(|e| pem(&e.to_string(), TLS_KEY_KEY))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

fn pem_error(message: &str, what: &str) -> TlsError {
    TlsError::Pem {
        path: PathBuf::from(what),
        message: message.to_owned(),
    }
}

/// Writes `files` (name, text) into the mount `sub` under `dir`, as the
/// kubelet lays out a pod's Secret volumes: for tests.
#[cfg(test)]
pub(crate) fn write_mounted(dir: &std::path::Path, sub: &str, files: &[(&str, &str)]) {
    let path = dir.join(sub);
    std::fs::create_dir_all(&path).expect("dir");
    for (name, text) in files {
        std::fs::write(path.join(name), text).expect("write");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_has_ssl_when_configure_named_it() {
        assert!(configured_with_ssl(
            "'--prefix=/usr' '--with-openssl' '--with-icu'"
        ));
        assert!(configured_with_ssl("'--with-ssl=openssl' '--with-lz4'"));
        assert!(!configured_with_ssl("'--prefix=/opt/pg' '--without-icu'"));
        assert!(!configured_with_ssl(""));
    }

    /// The PostgreSQL builds this machine has: Debian's 15 and the wheels
    /// set up by `scripts/setup` (16's is built without SSL).
    #[test]
    fn the_builds_on_this_machine_are_told_apart() {
        let bin = tusk_postgres::version::local_bin_dir;
        assert!(build_has_ssl(Path::new("/usr/lib/postgresql/15/bin")));
        assert!(!build_has_ssl(&bin(16)));
        assert!(build_has_ssl(&bin(17)));
    }

    /// The owner's certificate is what PostgreSQL serves and what other
    /// instances verify against; the cluster's authority still checks
    /// client certificates and tokens.
    #[test]
    fn the_owners_certificate_replaces_the_servers_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |sub: &str, files: &[(&str, &str)]| write_mounted(dir.path(), sub, files);
        write(
            "server-tls",
            &[(TLS_CERT_KEY, "S"), (TLS_KEY_KEY, "SK"), (CA_KEY, "C")],
        );
        write(
            "replication-tls",
            &[(TLS_CERT_KEY, "R"), (TLS_KEY_KEY, "RK"), (CA_KEY, "C")],
        );
        let mounted = Mounted::read(dir.path()).expect("read").expect("mounted");
        assert_eq!(mounted.postgres(), ["S", "SK", "C"]);
        write(
            POSTGRES_TLS_MOUNT,
            &[(TLS_CERT_KEY, "O"), (TLS_KEY_KEY, "OK"), (CA_KEY, "OC")],
        );
        let own = Mounted::read(dir.path()).expect("read").expect("mounted");
        assert_eq!(own.postgres(), ["O", "OK", "OC"]);
        assert_eq!(own.token_key_pem(), "C");
        assert_ne!(own, mounted, "a change to follow");
    }

    /// Tokens are checked against the token key once it is mounted, and
    /// pgBackRest's client presents the backup client's certificate, not
    /// the replication user's.
    #[test]
    fn the_token_key_and_the_backup_client_are_their_own() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |sub: &str, files: &[(&str, &str)]| write_mounted(dir.path(), sub, files);
        write(
            "server-tls",
            &[(TLS_CERT_KEY, "S"), (TLS_KEY_KEY, "SK"), (CA_KEY, "C")],
        );
        write(
            "replication-tls",
            &[(TLS_CERT_KEY, "R"), (TLS_KEY_KEY, "RK"), (CA_KEY, "C")],
        );
        write(
            "backup-client-tls",
            &[(TLS_CERT_KEY, "B"), (TLS_KEY_KEY, "BK"), (CA_KEY, "C")],
        );
        write("api-token", &[(TOKEN_PUBLIC_KEY, "T")]);
        let mounted = Mounted::read(dir.path()).expect("read").expect("mounted");
        assert_eq!(mounted.token_key_pem(), "T");
        assert_eq!(
            mounted.backup_client,
            Some(["B".to_owned(), "BK".to_owned()])
        );
        let installed = Installed::in_run_dir(dir.path());
        assert!(
            installed
                .backup_client()
                .cert_file
                .ends_with("backup-client.crt")
        );
    }

    /// pgBackRest's client checks its server's certificate against the
    /// pod address it connects to: the backup server runs only with a
    /// certificate naming its own.
    #[test]
    fn the_server_certificate_is_checked_for_the_pods_address() {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["orders-rw".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress("10.1.0.7".parse().expect("ip")));
        let cert = params.self_signed(&key).expect("cert").pem();
        let dir = tempfile::tempdir().expect("temp dir");
        for (sub, files) in [
            (
                "server-tls",
                [
                    (TLS_CERT_KEY, cert.as_str()),
                    (TLS_KEY_KEY, "K"),
                    (CA_KEY, "C"),
                ],
            ),
            (
                "replication-tls",
                [(TLS_CERT_KEY, "R"), (TLS_KEY_KEY, "RK"), (CA_KEY, "C")],
            ),
        ] {
            write_mounted(dir.path(), sub, &files);
        }
        let mounted = Mounted::read(dir.path()).expect("read").expect("mounted");
        assert!(mounted.server_names("10.1.0.7".parse().expect("ip")));
        assert!(!mounted.server_names("10.1.0.8".parse().expect("ip")));
    }

    #[test]
    fn nothing_mounted_means_no_tls() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(matches!(Mounted::read(dir.path()), Ok(None)));
    }

    #[test]
    fn a_server_certificate_without_the_rest_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = dir.path().join("server-tls");
        std::fs::create_dir_all(&server).expect("dir");
        std::fs::write(server.join(TLS_CERT_KEY), "cert").expect("write");
        let error = Mounted::read(dir.path()).expect_err("incomplete");
        assert!(error.to_string().contains("server-tls/tls.key"), "{error}");
    }
}
