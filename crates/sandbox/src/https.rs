//! Serving a router over HTTPS: TLS on each accepted connection, HTTP/1.1
//! and HTTP/2 (with upgrades, for watches and exec), and every connection
//! closed on shutdown. The API server serves this way, and so does the
//! kubelet's endpoint when it authenticates the API server by its client
//! certificate.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// Serves `router` until `shutdown` turns true (or its sender is
/// dropped), when open connections are closed.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    shutdown: watch::Receiver<bool>,
) {
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            // Who the client certificate names, for handlers that
            // authorize the caller (the kubelet's endpoint).
            let peer = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|cert| PeerIdentity::from_der(cert.as_ref()));
            let router = match peer {
                Some(peer) => router.layer(axum::Extension(peer)),
                None => router,
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = shutdown.wait_for(|stop| *stop) => {}
            }
        });
    }
}

/// The user and groups a verified client certificate names, as
/// Kubernetes reads them: the subject's common name and organizations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerIdentity {
    pub user: String,
    pub groups: Vec<String>,
}

impl PeerIdentity {
    /// The identity in a DER certificate; `None` without a common name.
    pub fn from_der(der: &[u8]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let user = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_owned))
            .collect();
        Some(PeerIdentity { user, groups })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_common_name_and_the_organizations() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kube-apiserver-kubelet-client");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.self_signed(&key).expect("a certificate");
        assert_eq!(
            PeerIdentity::from_der(cert.der()),
            Some(PeerIdentity {
                user: "kube-apiserver-kubelet-client".to_owned(),
                groups: vec!["system:masters".to_owned()],
            })
        );
        assert_eq!(PeerIdentity::from_der(b"not a certificate"), None);
    }
}
