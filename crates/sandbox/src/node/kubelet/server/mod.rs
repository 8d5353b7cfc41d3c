//! The kubelet's own HTTP endpoint, which the API server proxies
//! `pods/log` and `pods/exec` to, as kube-apiserver proxies them to the
//! kubelet on the pod's node.
//!
//! Why a network endpoint rather than a call inside the process: the
//! kubelet talks to the API server only through its client, and the two
//! need not share a process (tests start them side by side; another node
//! process could run the kubelet alone). So the kubelet does what a real
//! one does: it listens on loopback and writes the port into its Node's
//! `status.daemonEndpoints.kubeletEndpoint.Port` (address: the Node's
//! `InternalIP`, 127.0.0.1), where the API server looks it up.
//!
//! In the sandbox it speaks plain HTTP on 127.0.0.1 and accepts only
//! requests carrying the bearer token of the kubeconfig the kubelet was
//! given (the API server's own token), so other local users cannot run
//! commands in pods through it. Joined to a real control plane with a
//! client CA (`tls`), it serves HTTPS to callers with a client certificate
//! that CA signed, as kube-apiserver presents with
//! `--kubelet-client-certificate`, and lets each do only what the API
//! server allows its user (`authorize`).
//!
//! Paths follow the kubelet's: `/containerLogs/{namespace}/{pod}/{container}`
//! (`logs`) and `/exec/{namespace}/{pod}/{container}` (`exec`, over
//! WebSocket with the `channel` framing); `/faults/{fault}` (`faults`) is
//! the sandbox's own, for fault injection the API server relays.

pub mod authorize;
mod channel;
mod exec;
mod faults;
mod logs;
pub mod tls;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::json;

use super::faults::KubeletFaults;
use super::served::ServedPods;
use crate::https::PeerIdentity;

/// What the endpoint's handlers share.
pub struct ServerState {
    pub pods: ServedPods,
    pub faults: KubeletFaults,
    pub auth: EndpointAuth,
}

/// How the endpoint knows the API server calls.
pub enum EndpointAuth {
    /// Plain HTTP; a request must carry this bearer token.
    BearerToken(String),
    /// HTTPS with a client certificate the TLS handshake verified, whose
    /// user the API server must allow what the request does.
    ClientCertificate {
        tls: Arc<rustls::ServerConfig>,
        authorizer: authorize::Authorizer,
    },
}

/// Listens on a free loopback port.
pub fn bind() -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves until the task is aborted.
pub async fn serve(listener: std::net::TcpListener, state: Arc<ServerState>) {
    let tls = match &state.auth {
        EndpointAuth::ClientCertificate { tls, .. } => Some(tls.clone()),
        EndpointAuth::BearerToken(_) => None,
    };
    let router = Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(logs::container_logs),
        )
        .route("/exec/{namespace}/{pod}/{container}", any(exec::exec))
        .route("/faults/{fault}", post(faults::inject))
        .with_state(state);
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "the kubelet endpoint cannot listen");
            return;
        }
    };
    if let Some(config) = tls {
        // Held for as long as the endpoint serves: connections close when
        // the task is aborted.
        let (_serving, shutdown) = tokio::sync::watch::channel(false);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        crate::https::serve(listener, acceptor, router, shutdown).await;
    } else if let Err(error) = axum::serve(listener, router).await {
        tracing::error!(%error, "the kubelet endpoint stopped");
    }
}

/// Lets the request do `action`, or answers why not: over plain HTTP it
/// must carry the expected bearer token (401 otherwise); over TLS its
/// verified client certificate's user must be allowed `action` by the
/// API server ([`authorize::Authorizer`]; 403 otherwise, as a kubelet
/// answers).
async fn admit(
    state: &ServerState,
    headers: &HeaderMap,
    peer: Option<&PeerIdentity>,
    action: authorize::Action,
) -> Result<(), Response> {
    let token = match &state.auth {
        EndpointAuth::ClientCertificate { authorizer, .. } => {
            let Some(peer) = peer else {
                return Err(unauthorized());
            };
            if authorizer.allows(peer, action).await {
                return Ok(());
            }
            return Err(status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                format!(
                    "Forbidden (user={}, verb={}, resource=nodes, subresource=proxy)",
                    peer.user,
                    action.verb()
                ),
            ));
        }
        EndpointAuth::BearerToken(token) => token,
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !token.is_empty() && given == Some(token.as_str()) {
        Ok(())
    } else {
        Err(unauthorized())
    }
}

/// A v1 Status answer, as the API server relays it to the client.
fn status(code: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message.into(),
        "reason": reason,
        "code": code.as_u16(),
    });
    let mut response = (code, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn bad_request(message: impl Into<String>) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

fn unauthorized() -> Response {
    status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
}

fn pod_not_found(pod: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("pods \"{pod}\" not found on this node"),
    )
}
