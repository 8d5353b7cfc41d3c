//! Running the whole operator: HTTP endpoints, the admission webhook,
//! leader election and the controller. Used by `tusk operator` and, in
//! process, by the sandbox. Every replica serves the webhook; only the
//! leader reconciles.

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tokio::sync::watch;

use crate::config::OperatorConfig;
use crate::controller::{self, Options};
use crate::leader::{self, LeaseTiming};
use crate::metrics::Metrics;
use crate::server;
use crate::webhook::{self, WebhookSettings};

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
    /// The admission webhook; not served when `None`.
    pub webhook: Option<WebhookSettings>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Server(#[from] server::ServerError),
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
    #[error(transparent)]
    Webhook(#[from] webhook::serve::ServeError),
}

/// Runs until `stop` becomes true.
pub async fn run(
    client: Client,
    settings: Settings,
    stop: watch::Receiver<bool>,
) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::default());
    let served = Arc::new(webhook::serve::Served::default());
    let webhook = match &settings.webhook {
        Some(webhook) => Some(start_webhook(&client, webhook, &settings, &served, &stop).await?),
        None => None,
    };
    let ready: server::Readiness = match settings.webhook {
        Some(_) => {
            let served = served.clone();
            Arc::new(move || served.ready())
        }
        None => Arc::new(|| true),
    };
    let http = settings.http_address.map(|addr| {
        let mut stop = stop.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            server::serve(addr, metrics, ready, async move {
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
    for task in webhook.into_iter().flatten() {
        if let Err(error) = task.await {
            tracing::warn!(%error, "a webhook task failed");
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

/// Binds the webhook's address, then serves it and keeps its certificate
/// until `stop`.
async fn start_webhook(
    client: &Client,
    webhook: &WebhookSettings,
    settings: &Settings,
    served: &Arc<webhook::serve::Served>,
    stop: &watch::Receiver<bool>,
) -> Result<[tokio::task::JoinHandle<()>; 2], RunError> {
    let listener = webhook::serve::bind(webhook.address).await?;
    let serving = {
        let mut stop = stop.clone();
        let served = served.clone();
        let config = settings.config.clone();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(error) = webhook::serve::serve(listener, served, config, stopped).await {
                tracing::error!(%error, "the admission webhook stopped");
            }
        })
    };
    let certifying = tokio::spawn(webhook::certify::keep(
        client.clone(),
        webhook.registration.clone(),
        served.clone(),
        stop.clone(),
    ));
    Ok([serving, certifying])
}
