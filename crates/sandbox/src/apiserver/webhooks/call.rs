//! Calling one webhook as kube-apiserver calls it: `POST` an
//! AdmissionReview v1 over HTTPS to `clientConfig.url`, or to
//! `https://<service>.<namespace>.svc:<port><path>` reached at a ready
//! endpoint of that Service (the API server's endpoint routing), trusting
//! only `clientConfig.caBundle`, within `timeoutSeconds` (10 by default,
//! as `?timeout=` tells the webhook). Errors read as kube-apiserver's:
//! `failed calling webhook "<name>": failed to call webhook: ...`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;
use tusk_api::admission_review::{AdmissionResponse, AdmissionReview};

use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;

/// The default of `timeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 10;

/// Why a call produced no verdict (the failure policy decides).
#[derive(Debug)]
pub struct CallError(pub String);

/// Where and how to reach a webhook.
struct Endpoint {
    url: String,
    /// For a Service: the host name in `url` and the address it is
    /// reached at.
    resolve: Option<(String, SocketAddr)>,
}

fn timeout_of(webhook: &Value) -> Duration {
    let seconds = webhook
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
        .clamp(1, 30);
    Duration::from_secs(seconds)
}

/// The webhook's verdict on `review`.
pub async fn call(
    api: &Api,
    webhook: &Value,
    review: &AdmissionReview,
) -> Result<AdmissionResponse, CallError> {
    let timeout = timeout_of(webhook);
    let config = webhook.get("clientConfig").cloned().unwrap_or_default();
    let endpoint = endpoint(api, &config, timeout)?;
    let failed = |reason: String| {
        CallError(format!(
            "failed to call webhook: Post \"{}\": {reason}",
            endpoint.url
        ))
    };
    let tls = tls_config(&config).map_err(&failed)?;
    let mut client = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .timeout(timeout)
        .no_proxy();
    if let Some((host, address)) = &endpoint.resolve {
        client = client.resolve(host, *address);
    }
    let client = client.build().map_err(|e| failed(e.to_string()))?;
    let answer = client
        .post(&endpoint.url)
        .json(review)
        .send()
        .await
        .map_err(|e| failed(describe(&e)))?;
    let status = answer.status();
    let body = answer.bytes().await.map_err(|e| failed(describe(&e)))?;
    if !status.is_success() {
        return Err(CallError(format!(
            "failed to call webhook: the server responded with the status code {}",
            status.as_u16()
        )));
    }
    let review_uid = review
        .request
        .as_ref()
        .map(|r| r.uid.as_str())
        .unwrap_or_default();
    let answered: AdmissionReview = serde_json::from_slice(&body)
        .map_err(|e| CallError(format!("received invalid webhook response: {e}")))?;
    let response = answered.response.ok_or_else(|| {
        CallError("received invalid webhook response: webhook response was absent".to_owned())
    })?;
    if response.uid != review_uid {
        return Err(CallError(format!(
            "received invalid webhook response: expected response.uid=\"{review_uid}\", got \"{}\"",
            response.uid
        )));
    }
    Ok(response)
}

/// The root cause of a failed call (a refused connection, a certificate
/// not trusted), in words close to Go's; a timeout as Go's context says it.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "context deadline exceeded".to_owned();
    }
    let mut deepest: &dyn std::error::Error = error;
    while let Some(cause) = deepest.source() {
        deepest = cause;
    }
    deepest.to_string()
}

fn endpoint(api: &Api, config: &Value, timeout: Duration) -> Result<Endpoint, CallError> {
    let query = format!("?timeout={}s", timeout.as_secs());
    if let Some(url) = config.get("url").and_then(Value::as_str) {
        let separator = if url.contains('?') { '&' } else { '?' };
        return Ok(Endpoint {
            url: format!("{url}{separator}{}", &query[1..]),
            resolve: None,
        });
    }
    let Some(service) = config.get("service") else {
        return Err(CallError(
            "failed to call webhook: clientConfig has neither url nor service".to_owned(),
        ));
    };
    let text = |key: &str| service.get(key).and_then(Value::as_str).unwrap_or_default();
    let (namespace, name, path) = (text("namespace"), text("name"), text("path"));
    let port = service.get("port").and_then(Value::as_u64).unwrap_or(443);
    let host = format!("{name}.{namespace}.svc");
    let url = format!("https://{host}:{port}{path}{query}");
    let address = service_address(api, namespace, name, port)
        .map_err(|reason| CallError(format!("failed to call webhook: Post \"{url}\": {reason}")))?;
    Ok(Endpoint {
        url,
        resolve: Some((host, address)),
    })
}

/// A ready endpoint of Service `namespace/name` for its port `port`.
fn service_address(
    api: &Api,
    namespace: &str,
    name: &str,
    port: u64,
) -> Result<SocketAddr, String> {
    let get = |resource: &str| {
        api.store
            .get(&ObjectKey::new(resource, namespace, name))
            .ok()
            .flatten()
    };
    let service = get("/services").ok_or_else(|| format!("service \"{name}\" not found"))?;
    let port_name = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(port))
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        })
        .ok_or_else(|| format!("service \"{name}\" has no port {port}"))?;
    let endpoints = get("/endpoints");
    let no_endpoints = || format!("no endpoints available for service \"{name}\"");
    for subset in endpoints
        .as_ref()
        .and_then(|e| e.get("subsets"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let target = subset
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name)
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok());
        let address = subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("ip").and_then(Value::as_str))
            .find_map(|ip| ip.parse::<std::net::IpAddr>().ok());
        if let (Some(port), Some(ip)) = (target, address) {
            return Ok(SocketAddr::new(ip, port));
        }
    }
    Err(no_endpoints())
}

/// TLS trusting exactly the `caBundle` (none given: nothing is trusted,
/// where kube-apiserver would fall back to the system's roots, which no
/// test webhook's certificate chains to either).
fn tls_config(config: &Value) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bundle) = config.get("caBundle").and_then(Value::as_str) {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .map_err(|e| format!("caBundle is not base64: {e}"))?;
        for der in CertificateDer::pem_slice_iter(&pem) {
            let der = der.map_err(|e| format!("caBundle holds no PEM certificates: {e}"))?;
            roots
                .add(der)
                .map_err(|e| format!("caBundle holds an unusable certificate: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
