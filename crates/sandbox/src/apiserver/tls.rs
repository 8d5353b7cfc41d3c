//! Transport security and credentials: a CA generated on first start, a
//! server certificate signed by it for the names and addresses clients use
//! (127.0.0.1, localhost, the `kubernetes` Service's cluster IP and its DNS
//! names), a bearer token, and the kubeconfig that ties them together.
//!
//! They are kept in the data directory, so a restarted sandbox keeps the
//! same identity and an existing kubeconfig keeps working. The server
//! certificate's names are recorded beside it (`server.sans`); when the set
//! changes (the Service's address moved) the certificate is issued again
//! by the same CA (`ca.key`). A data directory from before the CA key was
//! kept gets a new CA.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
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

/// The DNS names in-cluster clients use for the API server.
pub const SERVICE_DNS_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The names and addresses the server certificate must carry.
fn subject_names(service_ip: Ipv4Addr) -> Vec<String> {
    let mut names = vec!["localhost".to_owned()];
    names.extend(SERVICE_DNS_NAMES.iter().map(|n| (*n).to_owned()));
    names.push("127.0.0.1".to_owned());
    names.push(service_ip.to_string());
    names
}

/// Loads the credentials in `dir`, creating them on first use, with a
/// server certificate valid for `service_ip` (the `kubernetes` Service).
pub fn load_or_create(dir: &Path, service_ip: Ipv4Addr) -> Result<Credentials, TlsError> {
    let ca_path = dir.join("ca.crt");
    let ca_key_path = dir.join("ca.key");
    let cert_path = dir.join("server.crt");
    let key_path = dir.join("server.key");
    let sans_path = dir.join("server.sans");
    let token_path = dir.join("token");
    if !token_path.exists() {
        write(&token_path, &uuid::Uuid::new_v4().simple().to_string())?;
    }
    let names = subject_names(service_ip);
    let recorded = fs::read_to_string(&sans_path).unwrap_or_default();
    let current = cert_path.exists() && key_path.exists() && recorded.trim() == names.join(",");
    if !current {
        let ca = if ca_path.exists() && ca_key_path.exists() {
            (read(&ca_path)?, read(&ca_key_path)?)
        } else {
            let (cert, key) = generate_ca()?;
            write(&ca_path, &cert)?;
            write(&ca_key_path, &key)?;
            (cert, key)
        };
        let (cert, key) = generate_server(&ca.1, &names)?;
        write(&cert_path, &cert)?;
        write(&key_path, &key)?;
        write(&sans_path, &names.join(","))?;
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

fn ca_params() -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "tusk-sandbox-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    Ok(params)
}

/// A new CA (PEM: certificate, key).
fn generate_ca() -> Result<(String, String), TlsError> {
    let key = KeyPair::generate()?;
    let cert = ca_params()?.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A server certificate for `names` (DNS names and IP addresses) signed by
/// the CA's key (PEM: certificate, key).
fn generate_server(ca_key_pem: &str, names: &[String]) -> Result<(String, String), TlsError> {
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    // The CA's name and key are all an issuer needs; its parameters are
    // the same every time.
    let issuer = Issuer::new(ca_params()?, ca_key);
    let server_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    for name in names {
        params.subject_alt_names.push(match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(name.clone().try_into()?),
        });
    }
    params
        .distinguished_name
        .push(DnType::CommonName, "tusk-sandbox");
    let server_cert = params.signed_by(&server_key, &issuer)?;
    Ok((server_cert.pem(), server_key.serialize_pem()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_service_address_reissues_the_server_certificate_from_the_same_ca() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = load_or_create(dir.path(), Ipv4Addr::new(127, 1, 7, 1)).expect("first");
        let cert = |dir: &Path| fs::read_to_string(dir.join("server.crt")).expect("cert");
        let issued = cert(dir.path());
        let again = load_or_create(dir.path(), Ipv4Addr::new(127, 1, 7, 1)).expect("again");
        assert_eq!(
            cert(dir.path()),
            issued,
            "the same names keep the certificate"
        );
        assert_eq!(again.token, first.token);
        let moved = load_or_create(dir.path(), Ipv4Addr::new(127, 1, 8, 1)).expect("moved");
        assert_ne!(
            cert(dir.path()),
            issued,
            "a new address gets a new certificate"
        );
        assert_eq!(moved.ca_pem, first.ca_pem, "from the same CA");
        let names = fs::read_to_string(dir.path().join("server.sans")).expect("names");
        assert!(names.ends_with(",127.0.0.1,127.1.8.1"), "{names}");
        assert!(
            names.contains("kubernetes.default.svc.cluster.local"),
            "{names}"
        );
    }
}
