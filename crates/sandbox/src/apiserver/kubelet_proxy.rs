//! Proxying to the kubelet of a pod's node, as kube-apiserver does for
//! `pods/log` and `pods/exec`: the kubelet's address is the Node's
//! `InternalIP` and its port `status.daemonEndpoints.kubeletEndpoint.Port`.
//! A plain response streams back as it comes; an upgrade (the WebSocket of
//! an exec session) is answered with the kubelet's `101 Switching
//! Protocols` and the two connections are then spliced byte for byte.
//!
//! The API server presents its own bearer token to the kubelet, which
//! accepts nothing else (see the kubelet's `server` module).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::apiserver::error::ApiError;

/// Where a node's kubelet listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kubelet {
    pub address: String,
    pub port: u16,
}

impl Kubelet {
    /// The kubelet endpoint a Node object announces, if any.
    pub fn of_node(node: &Value) -> Option<Self> {
        let status = &node["status"];
        let port = status["daemonEndpoints"]["kubeletEndpoint"]["Port"].as_u64()?;
        let address = status["addresses"]
            .as_array()?
            .iter()
            .find(|a| a["type"] == "InternalIP")?["address"]
            .as_str()?
            .to_owned();
        Some(Self {
            address,
            port: u16::try_from(port).ok().filter(|p| *p > 0)?,
        })
    }
}

/// The request headers that make a WebSocket handshake; the rest (the
/// client's credentials above all) stay with the API server.
const UPGRADE_HEADERS: [&str; 5] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
];

fn unreachable(kubelet: &Kubelet, error: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!(
        "error dialing the kubelet at {}:{}: {error}",
        kubelet.address, kubelet.port
    ))
}

/// Sends `method path_and_query` to the kubelet and relays its answer;
/// `upgrade` is the client's connection when the request asks for one.
pub async fn forward(
    kubelet: &Kubelet,
    token: &str,
    method: Method,
    path_and_query: &str,
    headers: &HeaderMap,
    upgrade: Option<OnUpgrade>,
) -> Result<Response, ApiError> {
    let tcp = TcpStream::connect((kubelet.address.as_str(), kubelet.port))
        .await
        .map_err(|e| unreachable(kubelet, e))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| unreachable(kubelet, e))?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let mut request = Request::builder()
        .method(method)
        .uri(path_and_query)
        .header(
            header::HOST,
            format!("{}:{}", kubelet.address, kubelet.port),
        )
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    for name in UPGRADE_HEADERS.iter().filter(|_| upgrade.is_some()) {
        for value in headers.get_all(*name) {
            request = request.header(*name, value);
        }
    }
    let request = request
        .body(Body::empty())
        .map_err(|e| ApiError::internal(format!("cannot build the kubelet request: {e}")))?;
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| unreachable(kubelet, e))?;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let client = upgrade.ok_or_else(|| {
            ApiError::bad_request("the kubelet switched protocols on a request that asked for none")
        })?;
        let backend = hyper::upgrade::on(&mut response);
        tokio::spawn(splice(client, backend));
    }
    let (parts, body) = response.into_parts();
    let mut relayed = Response::new(Body::new(body));
    *relayed.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if name != header::TRANSFER_ENCODING && name != header::CONTENT_LENGTH {
            relayed.headers_mut().append(name, value.clone());
        }
    }
    if parts.status == StatusCode::SWITCHING_PROTOCOLS {
        relayed
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    }
    Ok(relayed)
}

/// Copies bytes both ways between the client's and the kubelet's upgraded
/// connections until either ends.
async fn splice(client: OnUpgrade, backend: OnUpgrade) {
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(both) => both,
        Err(error) => {
            tracing::debug!(%error, "an upgraded kubelet connection failed to start");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut backend = TokioIo::new(backend);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_kubelet_is_found_from_the_node_status() {
        let node = json!({"status": {
            "addresses": [
                {"type": "Hostname", "address": "sandbox"},
                {"type": "InternalIP", "address": "127.0.0.1"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 41234}},
        }});
        assert_eq!(
            Kubelet::of_node(&node),
            Some(Kubelet {
                address: "127.0.0.1".into(),
                port: 41234
            })
        );
        let no_port =
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}});
        assert_eq!(Kubelet::of_node(&no_port), None);
    }
}
