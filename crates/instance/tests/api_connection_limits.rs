//! The instance API on 8000 is open to the pod network, so a flood of
//! idle TLS connections must not cost the manager what its lease renewals
//! and probes need: 2,000 connections that finish their handshake and
//! send nothing are opened against the API on loopback (bounded: 2,000
//! connections, 60 s). Meanwhile the server holds at most
//! `MAX_CONNECTIONS` of them, `/healthz` answers a new client, and a
//! stand-in for a lease renewal (a new connection and request to another
//! loopback server, as the manager makes to the API server) answers every
//! time; once the flood stops, the silent connections are closed after
//! `IDLE_TIMEOUT`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tusk_api::contract::{CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use tusk_instance::api_tls::{ApiTls, IDLE_TIMEOUT, MAX_CONNECTIONS, serve};

const FLOOD: usize = 2_000;
const FLOOD_BOUND: Duration = Duration::from_secs(60);

/// The descriptors this process has open.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// A server certificate for `orders-rw`, mounted as an instance finds it.
fn mounted(dir: &std::path::Path) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["orders-rw".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("cert")
        .pem();
    for sub in ["server-tls", "replication-tls"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).expect("dir");
        std::fs::write(path.join(TLS_CERT_KEY), &cert).expect("cert");
        std::fs::write(path.join(TLS_KEY_KEY), key.serialize_pem()).expect("key");
        std::fs::write(path.join(CA_KEY), &cert).expect("ca");
    }
    cert
}

fn connector(ca: &str) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).expect("ca"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// `GET /healthz` on a new connection: the status line, and how long it took.
async fn healthz(address: SocketAddr, tls: &TlsConnector) -> (String, Duration) {
    let started = Instant::now();
    let answer = async {
        let tcp = TcpStream::connect(address).await.ok()?;
        let name = ServerName::try_from("orders-rw").ok()?;
        let mut stream = tls.connect(name, tcp).await.ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: orders-rw\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await.ok();
        text.lines().next().map(str::to_owned)
    };
    let line = tokio::time::timeout(Duration::from_secs(5), answer)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "no answer within 5 s".to_owned());
    (line, started.elapsed())
}

/// A loopback HTTP server standing in for the API server the lease is
/// renewed at, and a loop renewing there every 100 ms on a new connection
/// (as a client whose pooled connection was closed must): how many
/// renewals failed, and how many were made.
async fn renewals(stop: Arc<AtomicUsize>) -> (usize, usize) {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let app = axum::Router::new().route("/lease", axum::routing::put(|| async { "renewed" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (mut failed, mut made) = (0, 0);
    while stop.load(Ordering::SeqCst) == 0 {
        let renewal = async {
            let mut tcp = TcpStream::connect(address).await.ok()?;
            tcp.write_all(b"PUT /lease HTTP/1.1\r\nhost: api\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await
                .ok()?;
            let mut text = String::new();
            tcp.read_to_string(&mut text).await.ok()?;
            text.contains("renewed").then_some(())
        };
        made += 1;
        if tokio::time::timeout(Duration::from_secs(1), renewal)
            .await
            .ok()
            .flatten()
            .is_none()
        {
            failed += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (failed, made)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_tls_connections_leaves_probes_and_renewals_answering() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = mounted(dir.path());
    let api = Arc::new(ApiTls::new(dir.path().to_owned(), "shop", "orders").expect("certificates"));
    let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let baseline = open_descriptors();
    tokio::spawn(serve(listener, app, api, std::future::pending()));
    let tls = connector(&ca);
    let stop = Arc::new(AtomicUsize::new(0));
    let renewing = tokio::spawn(renewals(stop.clone()));

    // The flood: connections that finish their handshake and send nothing,
    // kept open by this client.
    let started = Instant::now();
    let mut idle = Vec::with_capacity(FLOOD);
    while idle.len() < FLOOD {
        assert!(
            started.elapsed() < FLOOD_BOUND,
            "the flood took over {FLOOD_BOUND:?}"
        );
        let Ok(tcp) = TcpStream::connect(address).await else {
            continue;
        };
        let name = ServerName::try_from("orders-rw").expect("name");
        if let Ok(stream) = tls.connect(name, tcp).await {
            idle.push(stream);
        }
    }
    let flood_time = started.elapsed();
    let (line, took) = healthz(address, &tls).await;
    // This process holds the flood's client ends; the rest beyond the
    // baseline is the server's (and the renewals' few).
    let server_side = open_descriptors().saturating_sub(baseline + idle.len());
    println!(
        "{FLOOD} idle TLS connections opened in {flood_time:?}; server-side descriptors {server_side} \
         (limit {MAX_CONNECTIONS}); /healthz {line:?} in {took:?}"
    );
    assert!(line.contains("200"), "/healthz under the flood: {line}");
    assert!(
        server_side <= MAX_CONNECTIONS + 16,
        "the server holds {server_side} descriptors for {FLOOD} idle connections"
    );

    // Silent connections are closed once IDLE_TIMEOUT passed.
    tokio::time::sleep(IDLE_TIMEOUT + Duration::from_secs(2)).await;
    let after = open_descriptors().saturating_sub(baseline + idle.len());
    println!(
        "server-side descriptors {after} after {:?} of silence",
        IDLE_TIMEOUT + Duration::from_secs(2)
    );
    assert!(
        after <= 16,
        "{after} server-side descriptors after the idle timeout"
    );
    stop.store(1, Ordering::SeqCst);
    let (failed, made) = renewing.await.expect("renewals");
    println!("lease renewal stand-in: {failed} of {made} failed");
    assert!(
        made > 10 && failed == 0,
        "{failed} of {made} renewals failed"
    );
    drop(idle);
}
