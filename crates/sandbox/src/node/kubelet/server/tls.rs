//! The endpoint's HTTPS, for a kubelet joined to a real control plane:
//! a serving certificate of its own, self-signed for 127.0.0.1
//! (kube-apiserver checks a kubelet's certificate only when given
//! `--kubelet-certificate-authority`), and a client certificate required
//! of every caller and verified against the cluster's CA (the kubelet's
//! `--client-ca-file`), as a kubelet with anonymous requests off does.
//! Whoever holds a certificate that CA signed is let in: the kubelet does
//! not ask the API server (SubjectAccessReview) what the holder may do.

use std::sync::Arc;

use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

#[derive(Debug, thiserror::Error)]
pub enum EndpointTlsError {
    #[error("cannot make the serving certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("the client CA holds no usable certificate: {0}")]
    ClientCa(String),
    #[error("cannot configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The endpoint's TLS configuration, trusting clients that `client_ca_pem`
/// signed.
pub fn server_config(client_ca_pem: &str) -> Result<Arc<rustls::ServerConfig>, EndpointTlsError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| EndpointTlsError::ClientCa(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| EndpointTlsError::ClientCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(EndpointTlsError::ClientCa("no certificate".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| EndpointTlsError::ClientCa(e.to_string()))?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    params
        .distinguished_name
        .push(DnType::CommonName, "tusk-sandbox-kubelet");
    let cert = params.self_signed(&key)?;
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes())
        .map_err(|e| EndpointTlsError::ClientCa(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_ca_without_certificates_is_refused() {
        let error = server_config("not a certificate").expect_err("no CA");
        assert!(matches!(error, EndpointTlsError::ClientCa(_)), "{error}");
    }

    #[test]
    fn a_ca_certificate_makes_a_configuration() {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).expect("a CA");
        server_config(&ca.pem()).expect("a TLS configuration");
    }
}
