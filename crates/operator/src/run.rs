//! Running the whole operator: HTTP endpoints, leader election and the
//! controller. Used by `tusk operator` and, in process, by the sandbox.

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tokio::sync::watch;

use crate::config::OperatorConfig;
use crate::controller::{self, Options};
use crate::leader::{self, LeaseTiming};
use crate::metrics::Metrics;
use crate::server;

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// Namespace of the Lease (the operator's own).
    pub namespace: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    pub timing: LeaseTiming,
}

/// Everything `run` needs besides the client.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub config: OperatorConfig,
    pub options: Options,
    /// Where to serve `/metrics`, `/healthz`, `/readyz`; none when `None`.
    pub http_address: Option<SocketAddr>,
    /// Leader election; the controller runs unconditionally when `None`.
    pub leadership: Option<Leadership>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Server(#[from] server::ServerError),
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
}

/// Runs until `stop` becomes true.
pub async fn run(
    client: Client,
    settings: Settings,
    stop: watch::Receiver<bool>,
) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::default());
    let http = settings.http_address.map(|addr| {
        let mut stop = stop.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            server::serve(addr, metrics, async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await
        })
    });
    match &settings.leadership {
        Some(leadership) => {
            leader::run_while_leader(
                client.clone(),
                &leadership.namespace,
                &leadership.identity,
                leadership.timing,
                stop.clone(),
                |lost| {
                    controller::run(
                        client.clone(),
                        settings.config.clone(),
                        metrics.clone(),
                        settings.options.clone(),
                        lost,
                    )
                },
            )
            .await?;
        }
        None => {
            let mut stop = stop.clone();
            controller::run(
                client,
                settings.config.clone(),
                metrics.clone(),
                settings.options.clone(),
                async move {
                    let _ = stop.wait_for(|s| *s).await;
                },
            )
            .await;
        }
    }
    if let Some(http) = http {
        match http.await {
            Ok(result) => result?,
            Err(error) => tracing::warn!(%error, "the HTTP server task failed"),
        }
    }
    Ok(())
}
