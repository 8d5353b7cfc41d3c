//! How the operator reaches an instance manager's API: over HTTPS when the
//! pod serves it so (its probes' scheme, which the operator set together
//! with `TUSK_API_TLS`), verifying the server by the cluster's own
//! authority and the name [`instance_server_name`], and proving itself
//! with a token the cluster's token key signs
//! (`tusk_api::instance::TOKEN_HEADER`; a pod made before the token key
//! existed, which mounts none, gets one the authority signs).
//! A pod made before the API was served over HTTPS is read over plain
//! HTTP until it is rolled.
//!
//! Pods are reached by address, which no certificate names: the verifier
//! checks the chain as usual and the name the certificate must carry in
//! place of the address, as libpq does with `host` and `hostaddr`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Pod, Secret};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tusk_api::contract::instance_server_name;

use crate::builders::certificates::{Authority, TokenKey};

/// Who the operator's tokens name.
pub const OPERATOR_SUBJECT: &str = "tusk-operator";

/// Whether `pod` serves its API over HTTPS: its postgres container's
/// readiness probe says so.
pub fn served_over_https(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|spec| &spec.containers)
        .filter(|c| c.name == "postgres")
        .filter_map(|c| c.readiness_probe.as_ref()?.http_get.as_ref())
        .any(|get| {
            get.scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"))
        })
}

/// Whether `pod` mounts the token key's public half, and so checks tokens
/// against it rather than against the authority.
pub fn mounts_token_key(pod: &Pod) -> bool {
    let Some(name) = tusk_api::contract::TlsSecret::TokenPublicKey.mount_name() else {
        return false;
    };
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .any(|volume| volume.name == name)
}

/// The tokens for one cluster's pods: signed by the token key, and by the
/// authority for pods made before the token key (why not, otherwise).
#[derive(Clone)]
pub struct Tokens {
    pub current: Result<String, String>,
    pub legacy: Result<String, String>,
}

impl Tokens {
    /// The token `pod` accepts.
    pub fn for_pod(&self, pod: &Pod) -> Result<&str, &str> {
        let token = if mounts_token_key(pod) {
            &self.current
        } else {
            &self.legacy
        };
        token.as_deref().map_err(String::as_str)
    }
}

/// How one cluster's instances are reached.
#[derive(Clone)]
pub struct ClusterAccess {
    /// For pods serving plain HTTP.
    pub plain: reqwest::Client,
    /// For pods serving HTTPS: a client trusting the cluster's authority,
    /// and fresh tokens; why there is none otherwise.
    pub https: Result<(reqwest::Client, Tokens), String>,
}

impl ClusterAccess {
    /// The URL of `path` on `pod` at `ip`, the client and token to use;
    /// `Err` says why the pod cannot be asked.
    pub fn request(
        &self,
        pod: &Pod,
        ip: &str,
        port: u16,
        path: &str,
    ) -> Result<reqwest::RequestBuilder, String> {
        if !served_over_https(pod) {
            return Ok(self.plain.get(format!("http://{ip}:{port}{path}")));
        }
        let (client, tokens) = self.https.as_ref().map_err(String::clone)?;
        let token = tokens.for_pod(pod).map_err(str::to_owned)?;
        Ok(client
            .get(format!("https://{ip}:{port}{path}"))
            .header(tusk_api::instance::TOKEN_HEADER, token))
    }
}

/// HTTPS clients by authority, so that each is built once (a client keeps
/// its connections, which spares a handshake per poll).
#[derive(Default)]
pub struct InstanceClients {
    plain: reqwest::Client,
    by_authority: Mutex<HashMap<(String, String), reqwest::Client>>,
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl InstanceClients {
    /// How the operator reaches the instances of `cluster` in `namespace`,
    /// whose authority is kept in `authority` (`<cluster>-ca-key`) and
    /// token key in `token_key` (`<cluster>-api-token-key`), if the cache
    /// holds them.
    pub fn access(
        &self,
        namespace: &str,
        cluster: &str,
        authority: Option<&Secret>,
        token_key: Option<&Secret>,
    ) -> ClusterAccess {
        let current = token_key
            .ok_or_else(|| {
                format!(
                    "the cluster's token key (Secret {}) is not there yet",
                    tusk_api::contract::TlsSecret::TokenKey.secret_name(cluster)
                )
            })
            .and_then(|secret| TokenKey::from_secret(secret).map_err(|e| e.to_string()))
            .and_then(|key| {
                key.sign_token(OPERATOR_SUBJECT, namespace, cluster, unix_now())
                    .map_err(|e| e.to_string())
            });
        let https = authority
            .ok_or_else(|| {
                format!(
                    "the cluster's authority (Secret {}) is not there yet",
                    tusk_api::contract::TlsSecret::CaKey.secret_name(cluster)
                )
            })
            .and_then(|secret| Authority::from_secret(secret).map_err(|e| e.to_string()))
            .and_then(|authority| {
                let client = self.https_client(&authority, cluster)?;
                let legacy = authority
                    .sign_legacy_token(OPERATOR_SUBJECT, namespace, cluster, unix_now())
                    .map_err(|e| e.to_string());
                Ok((client, Tokens { current, legacy }))
            });
        ClusterAccess {
            plain: self.plain.clone(),
            https,
        }
    }

    fn https_client(
        &self,
        authority: &Authority,
        cluster: &str,
    ) -> Result<reqwest::Client, String> {
        let key = (authority.id.clone(), cluster.to_owned());
        let mut clients = self.by_authority.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = https_client(&authority.cert_pem, &instance_server_name(cluster))?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// A client trusting `authority_pem` alone and expecting every server to
/// carry `name`.
pub fn https_client(authority_pem: &str, name: &str) -> Result<reqwest::Client, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(authority_pem.as_bytes()) {
        let ca = ca.map_err(|e| format!("the authority's certificate: {e}"))?;
        roots.add(ca).map_err(|e| e.to_string())?;
    }
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NamedServer { inner, name }))
        .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        // Drop a pooled connection before the instance closes it for
        // silence (`tusk_instance::api_tls::IDLE_TIMEOUT`, 10 s), so a
        // poll never goes out on a connection being closed.
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

/// Verifies a server by the authority and a fixed name, whatever address
/// it was reached by.
#[derive(Debug)]
struct NamedServer {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for NamedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _reached_as: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
