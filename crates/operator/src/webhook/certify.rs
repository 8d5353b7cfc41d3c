//! Keeping the webhook's certificate: every replica, leader or not, makes
//! sure the Secret holds a certificate that is not due (issuing one when
//! it is missing or due; a concurrent write by the other replica is a
//! conflict, and the next round reads what it wrote), serves what the
//! Secret holds, and puts its authorities in the `caBundle` of every
//! webhook of the operator's ValidatingWebhookConfiguration. A round runs
//! every minute, so a renewal by one replica is served by the other well
//! within the month a certificate outlives its renewal.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use super::certificate::{self, CertificateError, Issued, SECRET};
use super::serve::{ServeError, Served};

/// Where the webhook is reached and registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The operator's namespace, where the Secret and the Service are.
    pub namespace: String,
    /// The Service in front of the webhook.
    pub service: String,
    /// The ValidatingWebhookConfiguration whose `caBundle` is kept.
    pub configuration: String,
}

/// How often the Secret is read again.
pub const ROUND: Duration = Duration::from_secs(60);
/// How soon a failed round is tried again.
const RETRY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum CertifyError {
    #[error("the webhook's Secret or configuration: {0}")]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Certificate(#[from] CertificateError),
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Keeps the certificate until `stop` is true.
pub async fn keep(
    client: Client,
    registration: Registration,
    served: Arc<Served>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let wait = match round(&client, &registration, &served, Timestamp::now()).await {
            Ok(()) => ROUND,
            Err(error) => {
                tracing::warn!(%error, "the webhook's certificate is not in place yet");
                RETRY
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One round: the Secret, what is served, the `caBundle`.
pub async fn round(
    client: &Client,
    registration: &Registration,
    served: &Served,
    now: Timestamp,
) -> Result<(), CertifyError> {
    let issued = stored_or_issued(client, registration, now).await?;
    served.load(&issued.cert_pem, &issued.key_pem)?;
    inject(client, &registration.configuration, &issued.bundle_pem).await
}

async fn stored_or_issued(
    client: &Client,
    registration: &Registration,
    now: Timestamp,
) -> Result<Issued, CertifyError> {
    let names = certificate::service_names(&registration.service, &registration.namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &registration.namespace);
    let existing = secrets.get_opt(SECRET).await?;
    if let Some(issued) = existing
        .as_ref()
        .and_then(|s| certificate::current(s, &names, now))
    {
        return Ok(issued);
    }
    let previous = existing.as_ref().and_then(certificate::bundle_of);
    let issued = certificate::issue(&names, now, previous.as_deref())?;
    let mut secret = certificate::secret(&registration.namespace, &issued);
    match existing {
        Some(old) => {
            secret.metadata.resource_version = old.metadata.resource_version;
            secrets
                .replace(SECRET, &PostParams::default(), &secret)
                .await?;
            tracing::info!(renew_after = %issued.renew_after, "renewed the webhook's certificate");
        }
        None => {
            secrets.create(&PostParams::default(), &secret).await?;
            tracing::info!(renew_after = %issued.renew_after, "issued the webhook's certificate");
        }
    }
    Ok(issued)
}

/// Sets `bundle` as the `caBundle` of every webhook of `configuration`;
/// writes only when one differs. A configuration not installed (the
/// operator run without it) is left alone.
async fn inject(client: &Client, configuration: &str, bundle: &str) -> Result<(), CertifyError> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let Some(mut current) = api.get_opt(configuration).await? else {
        tracing::debug!(
            configuration,
            "no ValidatingWebhookConfiguration to inject into"
        );
        return Ok(());
    };
    let wanted = ByteString(bundle.as_bytes().to_vec());
    let mut changed = false;
    for webhook in current.webhooks.iter_mut().flatten() {
        if webhook.client_config.ca_bundle.as_ref() != Some(&wanted) {
            webhook.client_config.ca_bundle = Some(wanted.clone());
            changed = true;
        }
    }
    if changed {
        api.replace(configuration, &PostParams::default(), &current)
            .await?;
        tracing::info!(configuration, "set the webhook's caBundle");
    }
    Ok(())
}
