//! Transport security and credentials: a CA generated on first start, a
//! server certificate for 127.0.0.1 and localhost signed by it, a bearer
//! token, and the kubeconfig that ties them together.
//!
//! They are kept in the data directory, so a restarted sandbox keeps the
//! same identity and an existing kubeconfig keeps working.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid PEM file: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("cannot configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The sandbox's identity on disk.
pub struct Credentials {
    pub ca_pem: String,
    pub token: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

fn read(path: &Path) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

fn write(path: &Path, contents: &str) -> Result<(), TlsError> {
    fs::write(path, contents).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|source| {
            TlsError::Io {
                path: path.to_owned(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Loads the credentials in `dir`, creating them on first use.
pub fn load_or_create(dir: &Path) -> Result<Credentials, TlsError> {
    let ca_path = dir.join("ca.crt");
    let cert_path = dir.join("server.crt");
    let key_path = dir.join("server.key");
    let token_path = dir.join("token");
    if !(ca_path.exists() && cert_path.exists() && key_path.exists() && token_path.exists()) {
        let (ca, cert, key) = generate()?;
        write(&ca_path, &ca)?;
        write(&cert_path, &cert)?;
        write(&key_path, &key)?;
        write(&token_path, &uuid::Uuid::new_v4().simple().to_string())?;
    }
    let ca_pem = read(&ca_path)?;
    let token = read(&token_path)?.trim().to_owned();
    let cert_pem = read(&cert_path)?;
    let key_pem = read(&key_path)?;
    let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| TlsError::Pem {
        path: cert_path.clone(),
        message: e.to_string(),
    })?;
    let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(|e| TlsError::Pem {
        path: ca_path.clone(),
        message: e.to_string(),
    })?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::Pem {
        path: key_path.clone(),
        message: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert, ca], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Credentials {
        ca_pem,
        token,
        server_config: Arc::new(config),
    })
}

/// A CA and a server certificate for the loopback interface (PEM: CA
/// certificate, server certificate, server key).
fn generate() -> Result<(String, String, String), TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "tusk-sandbox-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    params
        .distinguished_name
        .push(DnType::CommonName, "tusk-sandbox");
    let server_cert = params.signed_by(&server_key, &issuer)?;
    Ok((ca_cert.pem(), server_cert.pem(), server_key.serialize_pem()))
}

/// The kubeconfig that kube-rs and kubectl use as it is.
pub fn kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: tusk-sandbox
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: tusk-sandbox
  user:
    token: {token}
contexts:
- name: tusk-sandbox
  context:
    cluster: tusk-sandbox
    user: tusk-sandbox
    namespace: default
current-context: tusk-sandbox
"
    )
}
