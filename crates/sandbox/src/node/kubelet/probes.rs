//! Startup, liveness and readiness probes: one check (exec, httpGet or
//! tcpSocket) and the thresholds that turn a run of results into a verdict.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::process::{Process, ProcessSpec};

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("probe port {0:?} names no port of the container")]
    UnknownPort(String),
    #[error(
        "probe has no exec, httpGet or tcpSocket action (gRPC probes are not supported by the sandbox)"
    )]
    NoAction,
}

/// One check, ready to run.
#[derive(Clone, Debug)]
pub enum Check {
    /// `exec`: the command, resolved and translated like the container's.
    Exec(ProcessSpec),
    Http {
        address: SocketAddr,
        path: String,
        host_header: String,
        /// Over TLS, the certificate not verified.
        https: bool,
    },
    Tcp(SocketAddr),
}

/// A probe's settings, with Kubernetes' defaults.
#[derive(Clone, Debug)]
pub struct ProbePlan {
    pub check: Check,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

fn seconds(value: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(value.map_or(default, |v| v.max(0) as u64))
}

fn count(value: Option<i32>, default: u32) -> u32 {
    value.map_or(default, |v| v.max(1) as u32)
}

fn port_number(port: &IntOrString, container: &Container) -> Result<u16, ProbeError> {
    match port {
        IntOrString::Int(n) => {
            u16::try_from(*n).map_err(|_| ProbeError::UnknownPort(n.to_string()))
        }
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| ProbeError::UnknownPort(name.clone())),
    }
}

impl ProbePlan {
    /// Builds the plan for `probe` of `container` in a pod at `pod_ip`;
    /// `exec` turns an exec command into a runnable spec.
    pub fn new(
        probe: &Probe,
        container: &Container,
        pod_ip: IpAddr,
        exec: impl FnOnce(&[String]) -> Result<ProcessSpec, String>,
    ) -> Result<Result<Self, String>, ProbeError> {
        let check = if let Some(action) = &probe.exec {
            match exec(action.command.as_deref().unwrap_or(&[])) {
                Ok(spec) => Check::Exec(spec),
                Err(message) => return Ok(Err(message)),
            }
        } else if let Some(action) = &probe.http_get {
            // Over HTTPS the certificate is not verified, as the kubelet
            // does not ([`crate::unverified_tls`]).
            let https = action
                .scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"));
            let port = port_number(&action.port, container)?;
            let ip = action
                .host
                .as_deref()
                .and_then(|h| h.parse().ok())
                .unwrap_or(pod_ip);
            Check::Http {
                address: SocketAddr::new(ip, port),
                path: action.path.clone().unwrap_or_else(|| "/".into()),
                host_header: format!("{ip}:{port}"),
                https,
            }
        } else if let Some(action) = &probe.tcp_socket {
            let port = port_number(&action.port, container)?;
            let ip = action
                .host
                .as_deref()
                .and_then(|h| h.parse().ok())
                .unwrap_or(pod_ip);
            Check::Tcp(SocketAddr::new(ip, port))
        } else {
            return Err(ProbeError::NoAction);
        };
        Ok(Ok(Self {
            check,
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: Duration::from_secs(count(probe.period_seconds, 10).into()),
            timeout: seconds(probe.timeout_seconds, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }))
    }
}

/// Runs one check; `Ok(())` is success, `Err` says why it failed.
pub async fn run_check(check: &Check, timeout: Duration) -> Result<(), String> {
    match check {
        Check::Exec(spec) => {
            let mut process = Process::spawn(spec).map_err(|e| e.to_string())?;
            match tokio::time::timeout(timeout, process.wait()).await {
                Ok(exit) if exit.success() => Ok(()),
                Ok(exit) => Err(format!("command exited with code {}", exit.code)),
                Err(_) => {
                    process.stop(Duration::ZERO).await;
                    Err(format!("command timed out after {timeout:?}"))
                }
            }
        }
        Check::Tcp(address) => {
            match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("dial tcp {address}: {e}")),
                Err(_) => Err(format!("dial tcp {address}: timed out")),
            }
        }
        Check::Http {
            address,
            path,
            host_header,
            https,
        } => {
            let scheme = if *https { "https" } else { "http" };
            let get = async {
                let failed = |e: std::io::Error| format!("Get {scheme}://{address}{path}: {e}");
                let tcp = TcpStream::connect(address).await.map_err(failed)?;
                if *https {
                    let tls = crate::unverified_tls::connect(tcp, address.ip())
                        .await
                        .map_err(failed)?;
                    http_get(tls, path, host_header).await.map_err(failed)?
                } else {
                    http_get(tcp, path, host_header).await.map_err(failed)?
                }
                .map_err(|code| format!("HTTP probe failed with statuscode: {code}"))
            };
            tokio::time::timeout(timeout, get)
                .await
                .unwrap_or_else(|_| Err(format!("Get {scheme}://{address}{path}: timed out")))
        }
    }
}

/// A probe's GET on an open connection: `Ok(Err(code))` for a status
/// outside 200..400.
async fn http_get<S>(mut stream: S, path: &str, host: &str) -> std::io::Result<Result<(), u16>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.contains(&b'\n') {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("malformed response"))?;
    Ok(if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(code)
    })
}

/// Turns a run of results into a verdict with the probe's thresholds.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    successes: u32,
    failures: u32,
    /// `None` until a threshold is first reached.
    pub passing: Option<bool>,
}

impl Verdict {
    /// Records one result; returns true when the verdict changed.
    pub fn record(&mut self, ok: bool, plan: &ProbePlan) -> bool {
        let before = self.passing;
        if ok {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if self.successes >= plan.success_threshold {
                self.passing = Some(true);
            }
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            if self.failures >= plan.failure_threshold {
                self.passing = Some(false);
            }
        }
        before != self.passing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use tokio::net::TcpListener;

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn plan(check: Check, failure_threshold: u32) -> ProbePlan {
        ProbePlan {
            check,
            initial_delay: Duration::ZERO,
            period: Duration::from_millis(10),
            timeout: Duration::from_secs(2),
            success_threshold: 1,
            failure_threshold,
        }
    }

    #[tokio::test]
    async fn tcp_checks_pass_only_while_something_listens() {
        // One socket on an address of its own, checked while only bound and
        // then while listening: the port is never freed, so no other test's
        // listener and no client's source port can take it in between.
        let own = IpAddr::V4(Ipv4Addr::new(127, 3, 0, 1));
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::new(own, 0)).expect("bind");
        let address = socket.local_addr().expect("addr");
        assert!(
            run_check(&Check::Tcp(address), Duration::from_secs(2))
                .await
                .is_err(),
            "a bound port nobody listens on must fail the check"
        );
        let listener = socket.listen(8).expect("listen");
        assert!(
            run_check(&Check::Tcp(address), Duration::from_secs(2))
                .await
                .is_ok(),
            "a listening port must pass the check"
        );
        drop(listener);
    }

    #[tokio::test]
    async fn http_checks_read_the_status_code() {
        let listener = TcpListener::bind((Ipv4Addr::new(127, 3, 0, 2), 0))
            .await
            .expect("bind");
        let address = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            for status in ["200 OK", "503 Service Unavailable"] {
                let (mut socket, _) = listener.accept().await.expect("accept");
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let response = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                socket.write_all(response.as_bytes()).await.expect("write");
            }
        });
        let check = Check::Http {
            address,
            path: "/healthz".into(),
            host_header: address.to_string(),
            https: false,
        };
        assert_eq!(run_check(&check, Duration::from_secs(2)).await, Ok(()));
        let failure = run_check(&check, Duration::from_secs(2))
            .await
            .expect_err("503 fails");
        assert!(failure.contains("503"), "{failure}");
        server.await.expect("server");
    }

    /// Over HTTPS a certificate nobody could verify is accepted, as the
    /// kubelet accepts it; a plain HTTP server fails the check.
    #[tokio::test]
    async fn https_checks_do_not_verify_the_certificate() {
        let listener = TcpListener::bind((Ipv4Addr::new(127, 3, 0, 3), 0))
            .await
            .expect("bind");
        let address = listener.local_addr().expect("addr");
        let certified =
            rcgen::generate_simple_self_signed(vec!["nobody.example".to_owned()]).expect("cert");
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .expect("config");
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(socket).await.expect("handshake");
            let mut buf = [0u8; 1024];
            let _ = tls.read(&mut buf).await;
            tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await
                .expect("write");
            tls.shutdown().await.expect("close");
        });
        let mut check = Check::Http {
            address,
            path: "/readyz".into(),
            host_header: address.to_string(),
            https: true,
        };
        assert_eq!(run_check(&check, Duration::from_secs(2)).await, Ok(()));
        server.await.expect("server");

        let plain = TcpListener::bind((Ipv4Addr::new(127, 3, 0, 3), 0))
            .await
            .expect("bind");
        let plain_address = plain.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (mut socket, _) = plain.accept().await.expect("accept");
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await;
        });
        if let Check::Http { address, .. } = &mut check {
            *address = plain_address;
        }
        let failure = run_check(&check, Duration::from_secs(2))
            .await
            .expect_err("plain HTTP is not HTTPS");
        assert!(failure.starts_with("Get https://"), "{failure}");
        server.await.expect("server");
    }

    #[tokio::test]
    async fn exec_checks_use_the_exit_code_and_the_timeout() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = |script: &str| ProcessSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            working_dir: dir.path().to_owned(),
            log: dir.path().join("probe.log"),
            ..ProcessSpec::default()
        };
        assert!(
            run_check(&Check::Exec(spec("true")), Duration::from_secs(5))
                .await
                .is_ok()
        );
        assert!(
            run_check(&Check::Exec(spec("exit 1")), Duration::from_secs(5))
                .await
                .is_err()
        );
        let slow = run_check(&Check::Exec(spec("sleep 5")), Duration::from_millis(200)).await;
        assert!(slow.expect_err("times out").contains("timed out"));
    }

    #[test]
    fn thresholds_decide_the_verdict() {
        let plan = plan(Check::Tcp(SocketAddr::new(LOCAL, 1)), 3);
        let mut verdict = Verdict::default();
        assert!(verdict.record(true, &plan));
        assert_eq!(verdict.passing, Some(true));
        assert!(!verdict.record(false, &plan));
        assert!(!verdict.record(false, &plan));
        assert_eq!(
            verdict.passing,
            Some(true),
            "two failures are below the threshold"
        );
        assert!(verdict.record(false, &plan));
        assert_eq!(verdict.passing, Some(false));
    }
}
