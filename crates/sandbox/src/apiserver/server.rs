//! Serving the API over HTTPS (`crate::https`), every request handed to
//! [`handlers::handle`].

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::apiserver::handlers;
use crate::apiserver::state::Api;

pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    api: Arc<Api>,
    shutdown: watch::Receiver<bool>,
) {
    let router = Router::new().fallback(handlers::handle).with_state(api);
    crate::https::serve(listener, acceptor, router, shutdown).await;
}
