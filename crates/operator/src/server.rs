//! The operator's own HTTP endpoints: `/metrics` (Prometheus text),
//! `/healthz` and `/readyz` (ready once the admission webhook, when served,
//! has its certificate).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// Whether the replica is ready for traffic: always, unless it serves the
/// admission webhook, which is ready once it has a certificate to serve.
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Clone)]
struct Endpoints {
    metrics: Arc<Metrics>,
    ready: Readiness,
}

pub fn router(metrics: Arc<Metrics>, ready: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(Endpoints { metrics, ready })
}

async fn readyz(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    if (endpoints.ready)() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the admission webhook has no certificate yet",
        )
    }
}

async fn render_metrics(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    let metrics = endpoints.metrics;
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

/// Serves until `shutdown` completes.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Readiness,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    axum::serve(listener, router(metrics, ready))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve)
}
