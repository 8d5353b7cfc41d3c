//! `tusk instance run`: the HTTP API and the convergence loop together,
//! until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::context::InstanceContext;
use crate::convergence::{ConvergenceError, Manager};
use crate::desired::DesiredStateSource;
use crate::http::{self, HttpError};
use crate::primacy::Primacy;
use crate::reaper;
use crate::state::SharedState;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Convergence(#[from] ConvergenceError),
}

/// Serves the HTTP API on the pod IP and converges PostgreSQL until
/// `shutdown` resolves; returns once PostgreSQL has stopped. PostgreSQL
/// runs as primary only while `primacy` holds the primary lease.
pub async fn run_instance<S: DesiredStateSource>(
    ctx: InstanceContext,
    source: S,
    state: SharedState,
    primacy: Primacy,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let ctx = Arc::new(ctx);
    let address = SocketAddr::new(ctx.settings.pod_ip, ctx.settings.http_port);
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let listener = http::bind(address).await?;
    let server = tokio::spawn(http::serve(listener, ctx.clone(), state.clone(), async {
        let _ = http_stopped.await;
    }));
    let reaper = (std::process::id() == 1)
        .then(|| tokio::spawn(reaper::run(reaper::SCAN_INTERVAL, state.clone())));
    let manager = Manager::new(ctx.as_ref().clone(), source, state, primacy);
    let outcome = manager.run(shutdown).await;
    let _ = stop_http.send(());
    if let Some(reaper) = reaper {
        reaper.abort();
    }
    match server.await {
        Ok(Err(error)) => tracing::warn!(%error, "HTTP API stopped with an error"),
        Err(error) => tracing::warn!(%error, "HTTP API task failed"),
        Ok(Ok(())) => {}
    }
    Ok(outcome?)
}
