//! Serving the webhook over HTTPS: `POST` [`PATH`] takes an AdmissionReview
//! and answers it ([`super::review`]). The certificate is read from a
//! [`Served`] on every handshake, so a renewed one is served at once,
//! without a restart and without dropping open connections.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tusk_api::admission_review::AdmissionReview;

use crate::config::OperatorConfig;

/// Where the API server posts reviews of PostgresClusters.
pub const PATH: &str = "/validate/postgresclusters";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read the webhook's certificate: {0}")]
    Certificate(String),
    #[error("cannot set up TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The certificate being served; empty until the first is loaded (a
/// handshake then fails, and the API server's failure policy applies).
#[derive(Debug, Default)]
pub struct Served {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl Served {
    /// Serves `cert_pem` (a chain) with `key_pem` from now on.
    pub fn load(&self, cert_pem: &str, key_pem: &str) -> Result<(), ServeError> {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| ServeError::Certificate(e.to_string()))?;
        if chain.is_empty() {
            return Err(ServeError::Certificate("no certificate in the PEM".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| ServeError::Certificate(e.to_string()))?;
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider.key_provider.load_private_key(key)?;
        let certified = Arc::new(CertifiedKey::new(chain, signing));
        if let Ok(mut current) = self.current.write() {
            *current = Some(certified);
        }
        Ok(())
    }

    /// True once a certificate is loaded.
    pub fn ready(&self) -> bool {
        self.current.read().is_ok_and(|c| c.is_some())
    }
}

impl ResolvesServerCert for Served {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok()?.clone()
    }
}

/// The webhook's routes.
pub fn router(config: OperatorConfig) -> Router {
    Router::new()
        .route(PATH, post(review))
        .with_state(Arc::new(config))
}

async fn review(
    State(config): State<Arc<OperatorConfig>>,
    Json(review): Json<AdmissionReview>,
) -> Json<AdmissionReview> {
    let answer = super::review::answer(&review, &config);
    if let Some(response) = &answer.response
        && !response.allowed
    {
        let request = review.request.as_ref();
        tracing::info!(
            namespace = request.and_then(|r| r.namespace.as_deref()).unwrap_or_default(),
            name = request.and_then(|r| r.name.as_deref()).unwrap_or_default(),
            reason = %response.status.as_ref().and_then(|s| s.get("message")).and_then(|m| m.as_str()).unwrap_or_default(),
            "admission refused"
        );
    }
    Json(answer)
}

/// Binds `addr` for [`serve`].
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Serves the webhook on `listener` with the certificate of `served`
/// until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    served: Arc<Served>,
    config: OperatorConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(served);
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let router = router(config);
    tokio::pin!(shutdown);
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "the webhook cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            // A client that never finishes its handshake holds nothing for long.
            let Ok(Ok(stream)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
