//! `pods/proxy` through kube-rs: a pod's HTTP answer as it is (status,
//! body, content type), the port asked for or the first one declared,
//! and kube-apiserver's refusals: a missing pod, a pod without an
//! address, a named port, a user without `get` on `pods/proxy`, a port
//! nothing listens on; an `https:` port reached without verifying it.
//!
//! The "pod" is a small HTTP server on a free loopback port, and the Pod
//! object says `status.podIP: 127.0.0.1`: no kubelet runs here.

use axum::http::{Request, StatusCode, header};
use axum::response::IntoResponse;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tusk_sandbox::testing::client_for_service_account;

use crate::common::{TestSandbox, WAIT};
use crate::rbac_support::{role, role_binding};
use crate::tokens::create_service_account;

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A server standing in for a pod's container, stopped when dropped.
struct PodServer {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PodServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers with what it was asked: the method and URI, whether the
/// client's credentials came along, and the `X-Forwarded-Uri`; `/broken`
/// answers 500.
async fn answer(request: axum::extract::Request) -> axum::response::Response {
    let headers = request.headers();
    let forwarded_uri = headers
        .get("x-forwarded-uri")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    let text = format!(
        "{} {}\nauthorization: {}\nx-forwarded-uri: {forwarded_uri}",
        request.method(),
        request.uri(),
        headers.contains_key(header::AUTHORIZATION)
    );
    let (status, body) = if request.uri().path() == "/broken" {
        (StatusCode::INTERNAL_SERVER_ERROR, "boom".to_owned())
    } else {
        (StatusCode::OK, text)
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/x-pod; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn pod_server() -> PodServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    let app = axum::Router::new().fallback(answer);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    PodServer { port, task }
}

/// The same server over TLS, with a self-signed certificate no client
/// could verify (kube-apiserver's proxy does not verify pods).
async fn pod_server_tls() -> PodServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    let certified =
        rcgen::generate_simple_self_signed(vec!["web.example".to_owned()]).expect("a certificate");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .expect("a server configuration");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let app = axum::Router::new().fallback(answer);
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(
                    hyper_util::rt::TokioIo::new(tls),
                    hyper_util::service::TowerToHyperService::new(app),
                )
                .await;
            });
        }
    });
    PodServer { port, task }
}

/// A loopback port nothing listens on.
async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    listener.local_addr().expect("a bound address").port()
}

/// Creates the Pod `name` declaring `port` as `http`, at `ip` if given.
async fn create_pod(client: &Client, name: &str, port: u16, ip: Option<&str>) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "web", "image": "tusk",
            "ports": [{"name": "http", "containerPort": port}]}]},
    }))
    .expect("a valid Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
    if let Some(ip) = ip {
        let status = json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("the pod's address is set");
    }
}

/// What a client sees of a GET: status, content type, `Location`, body.
struct Answer {
    status: u16,
    content_type: String,
    location: String,
    body: String,
}

impl Answer {
    /// The `Status` object of a refusal.
    fn refusal(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not a Status ({e}): {}", self.body))
    }
}

async fn get(client: &Client, uri: &str, accept: &str) -> Answer {
    let request = Request::get(uri)
        .header(header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .expect("a request");
    let response = tokio::time::timeout(WAIT, client.send(request))
        .await
        .unwrap_or_else(|_| panic!("no answer in {WAIT:?} to {uri}"))
        .unwrap_or_else(|e| panic!("{uri} was not sent: {e}"));
    let text = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (status, content_type) = (response.status().as_u16(), text(header::CONTENT_TYPE));
    let location = text(header::LOCATION);
    let body = tokio::time::timeout(WAIT, response.into_body().collect_bytes())
        .await
        .expect("the body in time")
        .expect("the body");
    Answer {
        status,
        content_type,
        location,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

#[tokio::test]
async fn a_pods_port_answers_through_the_api_server_as_it_is() {
    let t = TestSandbox::start().await;
    let server = pod_server().await;
    let port = server.port;
    create_pod(&t.client, "web", port, Some("127.0.0.1")).await;

    let status = get(
        &t.client,
        &format!("{PODS}/web:{port}/proxy/status?x=1"),
        "*/*",
    )
    .await;
    assert_eq!(
        (status.status, status.content_type.as_str()),
        (200, "text/x-pod; charset=utf-8")
    );
    assert_eq!(
        status.body,
        format!(
            "GET /status?x=1\nauthorization: false\nx-forwarded-uri: {PODS}/web:{port}/proxy/status"
        ),
        "the pod sees the path and query, not the client's token"
    );

    let broken = get(
        &t.client,
        &format!("{PODS}/web:{port}/proxy/broken"),
        "text/html",
    )
    .await;
    assert_eq!(
        (
            broken.status,
            broken.content_type.as_str(),
            broken.body.as_str()
        ),
        (500, "text/x-pod; charset=utf-8", "boom"),
        "the pod's 500 comes back as the pod sent it"
    );

    for id in ["web".to_owned(), format!("http:web:{port}")] {
        let answer = get(&t.client, &format!("{PODS}/{id}/proxy/a/../b/"), "*/*").await;
        assert_eq!(answer.status, 200, "{id}: {}", answer.body);
        assert!(
            answer.body.starts_with("GET /b/\n"),
            "{id}: {}",
            answer.body
        );
    }

    let bare = get(&t.client, &format!("{PODS}/web:{port}/proxy?x=1"), "*/*").await;
    assert_eq!(
        (bare.status, bare.location.as_str()),
        (301, format!("{PODS}/web:{port}/proxy/?x=1").as_str()),
        "an empty path is redirected to `/`"
    );
}

#[tokio::test]
async fn an_https_port_answers_through_the_api_server_unverified() {
    let t = TestSandbox::start().await;
    let server = pod_server_tls().await;
    let port = server.port;
    create_pod(&t.client, "secure", port, Some("127.0.0.1")).await;

    let answer = get(
        &t.client,
        &format!("{PODS}/https:secure:{port}/proxy/status"),
        "*/*",
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.starts_with("GET /status\n"), "{}", answer.body);
}

#[tokio::test]
async fn kube_apiserver_refusals_come_back_as_its_status() {
    let t = TestSandbox::start().await;
    let server = pod_server().await;
    let port = server.port;
    create_pod(&t.client, "web", port, Some("127.0.0.1")).await;
    create_pod(&t.client, "pending", port, None).await;
    let cases = [
        (format!("nope:{port}/proxy/status"), 404, "NotFound", "pods \"nope\" not found".to_owned()),
        (format!("pending:{port}/proxy/"), 400, "BadRequest", "address not allowed".to_owned()),
        ("ftp:web:21/proxy/".to_owned(), 400, "BadRequest", "invalid pod request \"ftp:web:21\"".to_owned()),
        (
            "web:http/proxy/status".to_owned(),
            400,
            "BadRequest",
            "invalid pod request \"web:http\": the port must be a number, as kube-apiserver does not resolve a pod's named ports".to_owned(),
        ),
    ];
    for (id, code, reason, message) in cases {
        let status = get(&t.client, &format!("{PODS}/{id}"), "*/*")
            .await
            .refusal();
        assert_eq!(
            (&status["code"], &status["reason"], &status["message"]),
            (&json!(code), &json!(reason), &json!(message)),
            "{id}"
        );
    }
}

/// An admin client that takes a 503 as it comes: kube-rs retries 503s
/// by default (fifteen times, backing off), as it would a real cluster's.
async fn client_without_retries(t: &TestSandbox) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(t.sandbox.kubeconfig_path())
        .expect("the sandbox's kubeconfig reads");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a client configuration");
    config.default_retry = false;
    Client::try_from(config).expect("a client")
}

#[tokio::test]
async fn a_port_nothing_listens_on_is_service_unavailable() {
    let t = TestSandbox::start().await;
    let port = closed_port().await;
    create_pod(&t.client, "web", port, Some("127.0.0.1")).await;
    let client = client_without_retries(&t).await;
    let answer = get(&client, &format!("{PODS}/web:{port}/proxy/status"), "*/*").await;
    assert_eq!(answer.status, 503);
    let status = answer.refusal();
    assert_eq!(
        (&status["reason"], &status["message"]),
        (
            &json!("ServiceUnavailable"),
            &json!(format!(
                "error trying to reach service: dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        )
    );
}

#[tokio::test]
async fn proxying_to_a_pod_needs_get_on_pods_proxy() {
    let t = TestSandbox::start().await;
    let server = pod_server().await;
    let port = server.port;
    create_pod(&t.client, "web", port, Some("127.0.0.1")).await;
    create_service_account(&t.client, "default", "reader").await;
    let reader = client_for_service_account(&t.sandbox, "default", "reader").await;
    let pods_only = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
    role(&t.client, "default", "pods", pods_only)
        .await
        .expect("role");
    role_binding(&t.client, "default", "pods", "Role/pods", "default/reader")
        .await
        .expect("binding");
    let uri = format!("{PODS}/web:{port}/proxy/status");
    let refused = get(&reader, &uri, "*/*").await;
    assert_eq!(refused.status, 403);
    let status = refused.refusal();
    assert_eq!(
        (&status["reason"], &status["message"], &status["details"]),
        (
            &json!("Forbidden"),
            &json!(format!(
                "pods \"web:{port}\" is forbidden: User \"system:serviceaccount:default:reader\" cannot get resource \"pods/proxy\" in API group \"\" in the namespace \"default\""
            )),
            &json!({"name": format!("web:{port}"), "kind": "pods"}),
        )
    );
    let proxy = json!([{"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}]);
    role(&t.client, "default", "proxy", proxy)
        .await
        .expect("role");
    role_binding(
        &t.client,
        "default",
        "proxy",
        "Role/proxy",
        "default/reader",
    )
    .await
    .expect("binding");
    let allowed = get(&reader, &uri, "*/*").await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert!(
        allowed.body.starts_with("GET /status\n"),
        "{}",
        allowed.body
    );
}
