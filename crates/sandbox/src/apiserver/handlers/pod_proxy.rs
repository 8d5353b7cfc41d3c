//! `pods/proxy`: HTTP to a port of a pod through the API server, at
//! `/api/v1/namespaces/{ns}/pods/{name}[:port]/proxy[/{path}]`, as
//! kube-apiserver serves it (`ResourceLocation` in
//! pkg/registry/core/pod/strategy.go, `ProxyREST` in
//! pkg/registry/core/pod/rest/subresources.go, and apimachinery's
//! `UpgradeAwareHandler` and `Transport` in pkg/util/proxy):
//!
//! - the name segment is `name`, `name:port` or `scheme:name:port`, the
//!   scheme `http` or `https` (`SplitSchemeNamePort`); anything else is a
//!   400 `invalid pod request "..."`;
//! - the pod must exist (its 404); without a port, the first port of the
//!   first container that declares any, else the scheme's (80);
//! - the address is `status.podIPs[0]`; none, or one Go's `IsGlobalUnicast`
//!   refuses, is the 400 `address not allowed`, except that loopback
//!   addresses pass: the sandbox's pods live on 127.2.0.0/16 (see
//!   `node::kubelet::addresses`);
//! - the path after `proxy` is cleaned, its trailing slash kept; an empty
//!   one on a GET or HEAD is a 301 to the same URL with a `/`; the query
//!   goes on as sent;
//! - the request goes on with its method, body and headers, but for the
//!   hop-by-hop ones and the client's credentials (kube-apiserver drops
//!   `Authorization` once it has authenticated), `X-Forwarded-Uri` naming
//!   the proxy URL;
//! - the pod's answer comes back as it is: status, headers but for the
//!   hop-by-hop and CORS ones, body streamed; a `Location` on the pod is
//!   rewritten under the proxy URL;
//! - a pod that cannot be reached is the 503 `error trying to reach
//!   service: dial tcp ...`, in Go's words.
//!
//! Authorization is the ordinary one: the attributes of `pods/proxy` with
//! the name segment as it is (`web:8080`), the verb from the method.
//!
//! With `https`, the pod is reached over TLS and its certificate is not
//! verified, as kube-apiserver's proxy transport does not (see
//! [`crate::unverified_tls`]).
//!
//! Not served: named ports (a 400: kube-apiserver does not
//! resolve them either, it fails building the URL); upgrades (WebSocket);
//! the rewriting of links inside HTML bodies; `X-Forwarded-For`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::ResourceRequest;
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::{ResourcePath, Route};
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;

/// How long kube-apiserver's proxy dialer waits for a connection.
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// The methods kube-apiserver proxies (`proxyMethods`).
const PROXY_METHODS: [Method; 7] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::HEAD,
    Method::OPTIONS,
];

/// Headers that stay on their own connection (Go's `httputil` list).
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The CORS headers kube-apiserver removes from a proxied answer.
const CORS: [&str; 4] = [
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-allow-origin",
];

/// Whether `route` proxies to a pod, whose answer is whatever the pod
/// sends, JSON or not.
pub fn is_proxy_route(route: &Route) -> bool {
    matches!(route, Route::Resource(path)
        if path.plural == "pods" && path.group.is_empty() && path.proxy_path.is_some())
}

/// Whether `path` addresses the proxy subresource of a pod.
pub fn is_pod_proxy(resource: &Resource, path: &ResourcePath) -> bool {
    resource.kind == "Pod" && path.subresource.as_deref() == Some("proxy")
}

/// The name segment of a proxy URL, read as `SplitSchemeNamePort` reads it.
#[derive(Debug, PartialEq, Eq)]
struct NamePort<'a> {
    scheme: &'a str,
    name: &'a str,
    port: &'a str,
}

fn invalid(id: &str) -> ApiError {
    ApiError::bad_request(format!("invalid pod request {id:?}"))
}

impl<'a> NamePort<'a> {
    fn parse(id: &'a str) -> Result<Self, ApiError> {
        let parts: Vec<&str> = id.split(':').collect();
        let (scheme, name, port) = match parts.as_slice() {
            [name] => ("", *name, ""),
            [name, port] => ("", *name, *port),
            [scheme, name, port] => (*scheme, *name, *port),
            _ => return Err(invalid(id)),
        };
        if name.is_empty() || !matches!(scheme, "" | "http" | "https") {
            return Err(invalid(id));
        }
        Ok(Self { scheme, name, port })
    }
}

/// The port to dial, in digits: the one asked for, else the first one the
/// pod's containers declare, else 80 (Go's transport's for http).
fn port_of(pod: &Value, id: &str, asked: &str) -> Result<String, ApiError> {
    let declared = || {
        pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|c| c["ports"].as_array().and_then(|ports| ports.first()))
            .and_then(|port| port["containerPort"].as_u64())
    };
    let port = match (asked, declared()) {
        ("", Some(declared)) => declared.to_string(),
        ("", None) => "80".to_owned(),
        (asked, _) => asked.to_owned(),
    };
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(format!(
            "invalid pod request {id:?}: the port must be a number, as kube-apiserver does not resolve a pod's named ports"
        )));
    }
    Ok(port)
}

/// Go's `IsGlobalUnicast`, which kube-apiserver asks of a pod's address,
/// but for loopback addresses, where the sandbox's pods live.
fn allowed(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified() || v4.is_multicast() || v4.is_link_local() || v4.is_broadcast())
        }
        IpAddr::V6(v6) => !(v6.is_unspecified() || v6.is_multicast() || v6.is_unicast_link_local()),
    }
}

/// The pod's address: `status.podIPs[0]`, or `status.podIP`, which the v1
/// conversion keeps the same.
fn address_of(pod: &Value) -> Result<IpAddr, ApiError> {
    let status = &pod["status"];
    status["podIPs"][0]["ip"]
        .as_str()
        .or_else(|| status["podIP"].as_str())
        .and_then(|ip| ip.parse::<IpAddr>().ok())
        .map(|ip| ip.to_canonical())
        .filter(allowed)
        .ok_or_else(|| ApiError::bad_request("address not allowed"))
}

/// kube's `JoinPreservingTrailingSlash("", path)`: the path cleaned (`.`,
/// `..` and empty segments resolved), its trailing slash kept.
fn clean_path(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            segment => kept.push(segment),
        }
    }
    let mut cleaned = format!("/{}", kept.join("/"));
    if path.ends_with('/') && !cleaned.ends_with('/') {
        cleaned.push('/');
    }
    cleaned
}

/// What the pod is asked for: the cleaned path (`/` for none) and the
/// query as the client sent it.
fn target_uri(path: &str, raw_query: &str) -> String {
    let path = if path.is_empty() { "/" } else { path };
    if raw_query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{raw_query}")
    }
}

/// The proxy URL up to `proxy`, which redirects and `X-Forwarded-Uri`
/// name.
fn proxy_prefix(path: &ResourcePath, namespace: &str, id: &str) -> String {
    format!(
        "/api/{}/namespaces/{namespace}/pods/{id}/proxy",
        path.version
    )
}

/// kube's `Transport.rewriteURL`: a redirect to an absolute path on the
/// pod, or on the API server's own host, stays under the proxy URL.
fn rewrite_location(location: &str, prefix: &str, pod_host: &str, request_host: &str) -> String {
    let authority_at = match location.find("://") {
        Some(at)
            if at > 0
                && location[..at]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
        {
            Some(at + 3)
        }
        _ if location.starts_with("//") => Some(2),
        _ => None,
    };
    let host_end = authority_at.map_or(0, |at| {
        location[at..]
            .find(['/', '?', '#'])
            .map_or(location.len(), |end| at + end)
    });
    let host = authority_at.map_or("", |at| &location[at..host_end]);
    let rest = &location[host_end..];
    let (path, suffix) = rest.split_at(rest.find(['?', '#']).unwrap_or(rest.len()));
    let elsewhere = !host.is_empty() && host != pod_host && host != request_host;
    if elsewhere || !path.starts_with('/') {
        return location.to_owned();
    }
    let origin = if !host.is_empty() && host == request_host {
        &location[..host_end]
    } else {
        ""
    };
    let path = if path.starts_with(prefix) {
        path.to_owned()
    } else {
        format!("{prefix}{}", clean_path(path))
    };
    format!("{origin}{path}{suffix}")
}

/// The names the `Connection` header lists, which are hop-by-hop too.
fn connection_tokens(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .collect()
}

fn hop_by_hop(name: &HeaderName, connection: &[String]) -> bool {
    HOP_BY_HOP.contains(&name.as_str()) || connection.iter().any(|t| t == name.as_str())
}

/// Whether a request header goes on to the pod: not hop-by-hop, not the
/// client's credentials, not the length hyper computes again.
fn forwarded(name: &HeaderName, connection: &[String]) -> bool {
    !hop_by_hop(name, connection)
        && name != header::AUTHORIZATION
        && name != header::CONTENT_LENGTH
        && !name.as_str().starts_with("impersonate-")
}

pub async fn serve(
    api: &Api,
    resource: &Resource,
    path: &ResourcePath,
    request: ResourceRequest,
) -> Result<Response, ApiError> {
    let (Some(id), Some(namespace), Some(proxy_path)) = (
        path.name.as_deref(),
        path.namespace.as_deref(),
        path.proxy_path.as_deref(),
    ) else {
        return Err(ApiError::NoResource);
    };
    if !PROXY_METHODS.contains(&request.method) {
        return Err(ApiError::MethodNotAllowed {
            message: "the server does not allow this method on the requested resource".into(),
        });
    }
    let asked = NamePort::parse(id)?;
    let pod = api
        .store
        .get(&ObjectKey::new(&resource.key, namespace, asked.name))?
        .ok_or_else(|| ApiError::not_found(&resource.qualified_plural(), asked.name))?;
    let ip = address_of(&pod)?;
    let port = port_of(&pod, id, asked.port)?;
    let location = clean_path(proxy_path);
    let prefix = proxy_prefix(path, namespace, id);
    if location.is_empty() && matches!(request.method, Method::GET | Method::HEAD) {
        return Ok(redirect(&format!("{prefix}/"), &request.raw_query));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| unreachable(format!("dial tcp: address {port}: invalid port")))?;
    let address = SocketAddr::new(ip, port);
    let request_host = request
        .headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let outgoing = request_for_pod(request, address, &location, &prefix)?;
    let answer = send(address, outgoing, asked.scheme == "https").await?;
    Ok(relay(answer, |location| {
        rewrite_location(location, &prefix, &address.to_string(), &request_host)
    }))
}

/// kube's answer to an empty proxy path: the same URL with a `/`.
fn redirect(path: &str, raw_query: &str) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(value) = HeaderValue::from_str(&target_uri(path, raw_query)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// The request the pod gets.
fn request_for_pod(
    request: ResourceRequest,
    address: SocketAddr,
    location: &str,
    prefix: &str,
) -> Result<Request<Body>, ApiError> {
    let connection = connection_tokens(&request.headers);
    let mut outgoing = Request::builder()
        .method(request.method)
        .uri(target_uri(location, &request.raw_query));
    for (name, value) in &request.headers {
        if forwarded(name, &connection) {
            outgoing = outgoing.header(name, value);
        }
    }
    if !request.headers.contains_key(header::HOST) {
        outgoing = outgoing.header(header::HOST, address.to_string());
    }
    let forwarded_uri = format!(
        "{prefix}{}",
        if location.is_empty() { "/" } else { location }
    );
    outgoing
        .header("x-forwarded-uri", forwarded_uri)
        .body(Body::from(request.body))
        .map_err(|e| ApiError::bad_request(format!("cannot proxy this request: {e}")))
}

/// kube's 503 for a pod it cannot reach.
fn unreachable(cause: impl std::fmt::Display) -> ApiError {
    ApiError::ServiceUnavailable {
        message: format!("error trying to reach service: {cause}"),
    }
}

/// Go's words for a failed dial: `dial tcp 10.0.0.5:8080: connect:
/// connection refused`.
fn dial_error(address: SocketAddr, error: &std::io::Error) -> ApiError {
    let reason = match error.raw_os_error() {
        Some(code) => format!(
            "connect: {}",
            nix::errno::Errno::from_raw(code).desc().to_lowercase()
        ),
        None => error.to_string(),
    };
    unreachable(format!("dial tcp {address}: {reason}"))
}

async fn send(
    address: SocketAddr,
    request: Request<Body>,
    https: bool,
) -> Result<hyper::Response<Incoming>, ApiError> {
    let tcp = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| unreachable(format!("dial tcp {address}: i/o timeout")))?
        .map_err(|e| dial_error(address, &e))?;
    if https {
        let tls = tokio::time::timeout(
            DIAL_TIMEOUT,
            crate::unverified_tls::connect(tcp, address.ip()),
        )
        .await
        .map_err(|_| unreachable(format!("tls: handshake with {address}: i/o timeout")))?
        .map_err(|e| unreachable(format!("tls: handshake with {address}: {e}")))?;
        exchange(TokioIo::new(tls), request).await
    } else {
        exchange(TokioIo::new(tcp), request).await
    }
}

/// One request on an open connection.
async fn exchange<T>(io: T, request: Request<Body>) -> Result<hyper::Response<Incoming>, ApiError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(unreachable)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "a pods/proxy connection ended with an error");
        }
    });
    sender.send_request(request).await.map_err(unreachable)
}

/// The pod's answer as the client gets it, `Location` passed through
/// `rewrite`.
fn relay(answer: hyper::Response<Incoming>, rewrite: impl Fn(&str) -> String) -> Response {
    let (parts, body) = answer.into_parts();
    let connection = connection_tokens(&parts.headers);
    let mut relayed = Response::new(Body::new(body));
    *relayed.status_mut() = parts.status;
    let headers = relayed.headers_mut();
    for (name, value) in &parts.headers {
        if !hop_by_hop(name, &connection) && !CORS.contains(&name.as_str()) {
            headers.append(name, value.clone());
        }
    }
    let location = parts.headers.get(header::LOCATION);
    if let Some(Ok(location)) = location.map(|v| v.to_str())
        && let Ok(value) = HeaderValue::from_str(&rewrite(location))
    {
        headers.insert(header::LOCATION, value);
    }
    relayed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn name_port(id: &str) -> Option<(&str, &str, &str)> {
        NamePort::parse(id).ok().map(|p| (p.scheme, p.name, p.port))
    }

    #[test]
    fn the_name_segment_is_a_name_a_port_and_a_scheme() {
        assert_eq!(name_port("web"), Some(("", "web", "")));
        assert_eq!(name_port("web:8080"), Some(("", "web", "8080")));
        assert_eq!(name_port("web:"), Some(("", "web", "")));
        assert_eq!(name_port("web:http"), Some(("", "web", "http")));
        assert_eq!(name_port("http:web:8080"), Some(("http", "web", "8080")));
        assert_eq!(name_port("https:web:8443"), Some(("https", "web", "8443")));
        assert_eq!(name_port(":web:8080"), Some(("", "web", "8080")));
        for refused in [":8080", "ftp:web:21", "a:b:c:d", "http::80"] {
            let error = NamePort::parse(refused).expect_err(refused);
            assert_eq!(error.code(), 400, "{refused}");
            assert_eq!(
                error.status()["message"],
                format!("invalid pod request {refused:?}")
            );
        }
    }

    #[test]
    fn without_a_port_the_first_declared_one_is_dialled_else_80() {
        let pod = json!({"spec": {"containers": [
            {"name": "sidecar"},
            {"name": "web", "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9090}]},
            {"name": "db", "ports": [{"containerPort": 5432}]},
        ]}});
        assert_eq!(port_of(&pod, "web", "").expect("declared"), "8080");
        assert_eq!(port_of(&pod, "web:9090", "9090").expect("asked"), "9090");
        let bare = json!({"spec": {"containers": [{"name": "web"}]}});
        assert_eq!(port_of(&bare, "web", "").expect("default"), "80");
        let named = port_of(&pod, "web:http", "http").expect_err("named");
        assert_eq!(named.code(), 400);
        assert!(
            named.status()["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("invalid pod request \"web:http\"")),
            "{}",
            named.status()
        );
    }

    #[test]
    fn the_address_is_the_first_pod_ip_when_kube_would_dial_it() {
        let pod = |status: Value| json!({"status": status});
        let first =
            pod(json!({"podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]}));
        assert_eq!(address_of(&first).expect("ip").to_string(), "10.0.0.5");
        let sandbox = pod(json!({"podIP": "127.2.0.7"}));
        assert_eq!(address_of(&sandbox).expect("ip").to_string(), "127.2.0.7");
        for refused in [
            json!({}),
            json!({"podIP": ""}),
            json!({"podIP": "0.0.0.0"}),
            json!({"podIP": "169.254.169.254"}),
            json!({"podIP": "224.0.0.1"}),
            json!({"podIPs": [{"ip": "fe80::1"}]}),
        ] {
            let error = address_of(&pod(refused.clone())).expect_err("refused");
            assert_eq!(
                (error.code(), error.status()["message"].clone()),
                (400, json!("address not allowed")),
                "{refused}"
            );
        }
    }

    #[test]
    fn the_path_is_cleaned_its_trailing_slash_and_the_query_kept() {
        let cases = [
            ("", "", "/"),
            ("/", "", "/"),
            ("/status", "x=1", "/status?x=1"),
            ("/a/b/", "", "/a/b/"),
            ("/a/b/../c", "", "/a/c"),
            ("/../../etc/passwd", "", "/etc/passwd"),
            ("/a/./b/..", "q=a%20b&q=c", "/a?q=a%20b&q=c"),
        ];
        for (path, query, uri) in cases {
            assert_eq!(target_uri(&clean_path(path), query), uri, "{path}");
        }
        assert_eq!(
            clean_path(""),
            "",
            "an empty path is redirected, not cleaned"
        );
    }

    #[test]
    fn a_redirect_on_the_pod_stays_under_the_proxy_url() {
        let prefix = "/api/v1/namespaces/default/pods/web:8080/proxy";
        let rewrite =
            |location: &str| rewrite_location(location, prefix, "10.0.0.5:8080", "api:6443");
        assert_eq!(
            rewrite("/login?next=%2F"),
            format!("{prefix}/login?next=%2F")
        );
        assert_eq!(rewrite("http://10.0.0.5:8080/a/"), format!("{prefix}/a/"));
        assert_eq!(
            rewrite("https://api:6443/x"),
            format!("https://api:6443{prefix}/x")
        );
        assert_eq!(rewrite(&format!("{prefix}/kept")), format!("{prefix}/kept"));
        assert_eq!(rewrite("https://example.com/x"), "https://example.com/x");
        assert_eq!(rewrite("relative/x"), "relative/x");
    }
}
