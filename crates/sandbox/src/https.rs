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
