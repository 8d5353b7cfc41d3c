//! The HTTP API over HTTPS (`TUSK_API_TLS=true`, which the operator sets
//! on every pod it makes): the cluster's server certificate, and the token
//! `/status` requires ([`tusk_api::instance::TOKEN_HEADER`]), checked
//! against the token key's public half (not the certificate authority's:
//! reading reports must not need the key that issues certificates).
//!
//! Both come from the mounted Secrets, read again at most every
//! [`RELOAD_CHECK`]: a certificate the operator renews is served from the
//! next connection after the kubelet refreshed the volume, with no
//! restart. Connections are accepted and their handshakes made one task
//! each ([`serve`]), so a client that opens a connection and sends nothing
//! holds nobody else's request, and a handshake that does not finish within
//! [`HANDSHAKE_TIMEOUT`] is dropped.
//!
//! Port 8000 is open to the pod network (the kubelet's probes, the
//! operator, Prometheus), so what a connection may hold is bounded: at
//! most [`MAX_CONNECTIONS`] at once (a new one closes the oldest, so a
//! flood of idle connections can neither exhaust the manager's descriptors,
//! which its lease renewals and PostgreSQL connections need, nor lock the
//! probes out), request headers within [`HEADER_READ_TIMEOUT`], and no
//! connection silent for longer than [`IDLE_TIMEOUT`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tokio_rustls::TlsAcceptor;
use tusk_api::instance::{TokenClaims, token_audience};

use crate::tls::{Mounted, TlsError};

/// How often the mounted files are read again.
pub const RELOAD_CHECK: Duration = Duration::from_secs(5);
/// How long a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How many connections are served at once; the oldest is closed for a
/// new one beyond it. The operator, `tusk plan`, the kubelet and a
/// Prometheus scrape need a handful.
pub const MAX_CONNECTIONS: usize = 128;
/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may stay silent (nothing read or written)
/// before it is closed: a kept-alive connection between two polls, or one
/// that never sends a request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the API cannot serve over HTTPS, or refused a token.
#[derive(Debug, thiserror::Error)]
pub enum ApiTlsError {
    #[error(
        "TUSK_API_TLS is true but no server certificate is mounted under {0} (server-tls): the pod was not made by the operator"
    )]
    NotMounted(PathBuf),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("the mounted token key cannot check tokens: {0}")]
    Authority(jsonwebtoken::errors::Error),
}

/// Why `/status` refused a request.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error(
        "/status needs a token signed by the cluster's token key (Secret <cluster>-api-token-key) in the {0} header"
    )]
    NoToken(&'static str),
    #[error("the token in the {header} header is refused: {reason}")]
    Invalid {
        header: &'static str,
        reason: String,
    },
    #[error("tokens cannot be checked now: {0}")]
    Unavailable(String),
}

/// The mounted certificates as last read.
struct Loaded {
    checked: Instant,
    mounted: Mounted,
    acceptor: TlsAcceptor,
    key: Arc<DecodingKey>,
}

/// The server certificate and the token check of one instance, reloaded
/// when the mounted Secrets change.
pub struct ApiTls {
    secrets_dir: PathBuf,
    audience: String,
    loaded: Mutex<Option<Loaded>>,
}

impl ApiTls {
    /// For the instance of `cluster` in `namespace` whose Secrets are
    /// mounted under `secrets_dir`; fails when none is mounted, so that a
    /// pod told to serve HTTPS without certificates fails at its start.
    pub fn new(secrets_dir: PathBuf, namespace: &str, cluster: &str) -> Result<Self, ApiTlsError> {
        let api = ApiTls {
            secrets_dir,
            audience: token_audience(namespace, cluster),
            loaded: Mutex::new(None),
        };
        api.current()?;
        Ok(api)
    }

    /// The acceptor and token key for now, read again when
    /// [`RELOAD_CHECK`] has passed and rebuilt only when a file changed.
    fn current(&self) -> Result<(TlsAcceptor, Arc<DecodingKey>), ApiTlsError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(now) = loaded
            .as_ref()
            .filter(|l| l.checked.elapsed() < RELOAD_CHECK)
        {
            return Ok((now.acceptor.clone(), now.key.clone()));
        }
        let mounted = Mounted::read(&self.secrets_dir)?
            .ok_or_else(|| ApiTlsError::NotMounted(self.secrets_dir.clone()))?;
        if let Some(same) = loaded.as_mut().filter(|l| l.mounted == mounted) {
            same.checked = Instant::now();
            return Ok((same.acceptor.clone(), same.key.clone()));
        }
        let acceptor = TlsAcceptor::from(Arc::new(mounted.api_server_config()?));
        let key = DecodingKey::from_ec_pem(mounted.token_key_pem().as_bytes())
            .map_err(ApiTlsError::Authority)?;
        let key = Arc::new(key);
        *loaded = Some(Loaded {
            checked: Instant::now(),
            mounted,
            acceptor: acceptor.clone(),
            key: key.clone(),
        });
        Ok((acceptor, key))
    }

    /// Checks the token a request carried (the header's value, if any).
    pub fn check(&self, token: Option<&str>) -> Result<TokenClaims, Refusal> {
        const HEADER: &str = tusk_api::instance::TOKEN_HEADER;
        let token = token.ok_or(Refusal::NoToken(HEADER))?;
        let (_, key) = self
            .current()
            .map_err(|error| Refusal::Unavailable(error.to_string()))?;
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<TokenClaims>(token, &key, &validation)
            .map_err(|error| Refusal::Invalid {
                header: HEADER,
                reason: error.to_string(),
            })?
            .claims;
        // A token valid far longer than the operator signs them is not one
        // of its own.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let longest = tusk_api::instance::TOKEN_LIFETIME_SECONDS + validation.leeway;
        if claims.exp > now.saturating_add(longest) {
            return Err(Refusal::Invalid {
                header: HEADER,
                reason: format!("it is valid for more than {longest} s"),
            });
        }
        Ok(claims)
    }
}

/// Serves `app` over HTTPS on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Arc<ApiTls>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let mut connections = tokio::task::JoinSet::new();
    let mut live = std::collections::VecDeque::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        while connections.try_join_next().is_some() {}
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(error) => {
                // Out of file descriptors, most likely: let some close.
                tracing::warn!(%error, "the HTTP API cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let acceptor = match tls.current() {
            Ok((acceptor, _)) => acceptor,
            Err(error) => {
                tracing::warn!(%error, "the HTTP API has no usable certificate");
                continue;
            }
        };
        make_room(&mut live);
        live.push_back(connections.spawn(connection(tcp, acceptor, app.clone())));
    }
}

/// Closes the oldest connections while [`MAX_CONNECTIONS`] are open.
fn make_room(live: &mut std::collections::VecDeque<tokio::task::AbortHandle>) {
    live.retain(|task| !task.is_finished());
    while live.len() >= MAX_CONNECTIONS {
        if let Some(oldest) = live.pop_front() {
            oldest.abort();
        }
    }
}

/// One connection: its handshake, then its requests, until it closes or
/// stays silent for [`IDLE_TIMEOUT`].
async fn connection(tcp: tokio::net::TcpStream, acceptor: TlsAcceptor, app: Router) {
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::debug!(%error, "TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    let (stream, activity) = Watched::new(stream);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let served = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::select! {
        served = served => {
            if let Err(error) = served {
                tracing::debug!(%error, "HTTP API connection ended with an error");
            }
        }
        () = activity.silent_for(IDLE_TIMEOUT) => {
            tracing::debug!("HTTP API connection closed after staying silent");
        }
    }
}

/// When a connection last read or wrote anything.
#[derive(Clone)]
struct Activity(Arc<Mutex<Instant>>);

impl Activity {
    fn touch(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once nothing was read or written for `limit`.
    async fn silent_for(&self, limit: Duration) {
        loop {
            let due = self.last() + limit;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due.into()).await;
        }
    }
}

/// A stream that records its activity.
struct Watched<S> {
    inner: S,
    activity: Activity,
}

impl<S> Watched<S> {
    fn new(inner: S) -> (Self, Activity) {
        let activity = Activity(Arc::new(Mutex::new(Instant::now())));
        let watched = Watched {
            inner,
            activity: activity.clone(),
        };
        (watched, activity)
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tusk_api::contract::{CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY, TOKEN_PUBLIC_KEY};

    use super::*;

    fn sign(key: &rcgen::KeyPair, cluster: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claims = TokenClaims::new("test", "shop", cluster, now);
        let key = jsonwebtoken::EncodingKey::from_ec_pem(key.serialize_pem().as_bytes())
            .expect("an EC key");
        jsonwebtoken::encode(&jsonwebtoken::Header::new(Algorithm::ES256), &claims, &key)
            .expect("a token")
    }

    /// `/status` answers the token key alone: the certificate authority's
    /// key, which issues certificates, signs nothing it accepts, so that
    /// reading reports needs no key that can mint an identity.
    #[test]
    fn status_accepts_the_token_key_and_refuses_the_authoritys_key() {
        let authority = rcgen::KeyPair::generate().expect("key");
        let ca = rcgen::CertificateParams::new(vec!["orders-rw".to_owned()])
            .expect("params")
            .self_signed(&authority)
            .expect("cert")
            .pem();
        let token_key = rcgen::KeyPair::generate().expect("key");
        let dir = tempfile::tempdir().expect("temp dir");
        let write =
            |sub: &str, files: &[(&str, &str)]| crate::tls::write_mounted(dir.path(), sub, files);
        let key_pem = authority.serialize_pem();
        let tls = [
            (TLS_CERT_KEY, ca.as_str()),
            (TLS_KEY_KEY, key_pem.as_str()),
            (CA_KEY, ca.as_str()),
        ];
        write("server-tls", &tls);
        write("replication-tls", &tls);
        write(
            "api-token",
            &[(TOKEN_PUBLIC_KEY, &token_key.public_key_pem())],
        );
        let api = ApiTls::new(dir.path().to_owned(), "shop", "orders").expect("served");

        api.check(Some(&sign(&token_key, "orders")))
            .expect("the token key's token is accepted");
        let refused = api.check(Some(&sign(&authority, "orders")));
        assert!(
            matches!(refused, Err(Refusal::Invalid { .. })),
            "a token the authority signed: {refused:?}"
        );
        assert!(api.check(Some(&sign(&token_key, "other"))).is_err());
    }
}
