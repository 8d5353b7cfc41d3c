use super::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use cuts::Direction;

const WAIT: Duration = Duration::from_secs(5);

/// A server that answers each read with `tag` followed by what it read.
async fn tagged_echo(ip: &str, tag: &'static [u8]) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind((ip, 0)).await.expect("bind backend");
    let address = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = socket.read(&mut buf).await {
                    let reply = [tag, &buf[..n]].concat();
                    if n == 0 || socket.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (address, task)
}

async fn listen() -> (SocketAddr, Listener, ServiceCuts, Connections) {
    let listener = TcpListener::bind("127.0.200.1:0").await.expect("listen");
    let address = listener.local_addr().expect("addr");
    let (cuts, connections) = (ServiceCuts::default(), Connections::default());
    let started = Listener::start(listener, cuts.clone(), connections.clone());
    (address, started, cuts, connections)
}

fn backend(address: SocketAddr, pod: &str) -> Backend {
    Backend {
        address,
        pod: Some(("shop".into(), pod.into())),
    }
}

/// Sends `text` and reads the tagged answer (`tag` is one byte).
async fn ask(stream: &mut TcpStream, text: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(text).await?;
    let mut buf = vec![0u8; text.len() + 1];
    stream.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn ask_in_time(stream: &mut TcpStream, text: &[u8]) -> Vec<u8> {
    tokio::time::timeout(WAIT, ask(stream, text))
        .await
        .expect("answered in time")
        .expect("answered")
}

async fn connect(address: SocketAddr) -> TcpStream {
    tokio::time::timeout(WAIT, TcpStream::connect(address))
        .await
        .expect("connected in time")
        .expect("connected")
}

#[tokio::test]
async fn an_established_connection_outlives_its_endpoint_and_new_ones_go_elsewhere() {
    let (old, _a) = tagged_echo("127.1.200.1", b"A").await;
    let (new, _b) = tagged_echo("127.1.200.2", b"B").await;
    let (address, listener, _cuts, _connections) = listen().await;
    let mut refused = connect(address).await;
    let answer = tokio::time::timeout(WAIT, ask(&mut refused, b"x")).await;
    assert!(!matches!(answer, Ok(Ok(_))), "no backend, no conversation");
    listener.set_backends(vec![backend(old, "a")]);
    let mut established = connect(address).await;
    assert_eq!(ask_in_time(&mut established, b"ping").await, b"Aping");
    listener.set_backends(vec![backend(new, "b")]);
    assert_eq!(
        ask_in_time(&mut established, b"still").await,
        b"Astill",
        "the connection stays with the endpoint that left"
    );
    let mut fresh = connect(address).await;
    assert_eq!(ask_in_time(&mut fresh, b"new").await, b"Bnew");
    listener.set_backends(Vec::new());
    assert_eq!(ask_in_time(&mut established, b"on").await, b"Aon");
}

#[tokio::test]
async fn a_cut_pod_gets_nothing_until_the_cut_heals() {
    let (server, _a) = tagged_echo("127.1.200.3", b"A").await;
    let (address, listener, cuts, _connections) = listen().await;
    listener.set_backends(vec![backend(server, "a")]);
    let mut established = connect(address).await;
    assert_eq!(ask_in_time(&mut established, b"1").await, b"A1");
    for direction in [Direction::Ingress, Direction::Egress, Direction::Both] {
        cuts.cut("shop", "a", direction);
        let held = tokio::time::timeout(Duration::from_millis(500), ask(&mut established, b"2"));
        assert!(held.await.is_err(), "{direction:?}: nothing passes");
        let mut during = connect(address).await;
        let unanswered =
            tokio::time::timeout(Duration::from_millis(500), ask(&mut during, b"3")).await;
        assert!(unanswered.is_err(), "{direction:?}: a new connection hangs");
        cuts.heal("shop", "a");
        let mut buf = [0u8; 2];
        tokio::time::timeout(WAIT, established.read_exact(&mut buf))
            .await
            .expect("held bytes arrive after healing")
            .expect("read");
        assert_eq!(&buf, b"A2");
        tokio::time::timeout(WAIT, during.read_exact(&mut buf))
            .await
            .expect("the new connection is answered after healing")
            .expect("read");
        assert_eq!(&buf, b"A3");
    }
}

/// A server that reports what it reads and answers it back.
async fn recording_echo(ip: &str) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind((ip, 0)).await.expect("bind backend");
    let address = listener.local_addr().expect("addr");
    let (heard, hearing) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let heard = heard.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = socket.read(&mut buf).await {
                    let _ = heard.send(buf[..n].to_vec());
                    if n == 0 || socket.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (address, hearing)
}

#[tokio::test]
async fn a_cut_holds_back_only_its_direction() {
    let (server, mut heard) = recording_echo("127.1.200.5").await;
    let (address, listener, cuts, _connections) = listen().await;
    listener.set_backends(vec![backend(server, "a")]);
    let mut stream = connect(address).await;
    let mut buf = [0u8; 3];
    stream.write_all(b"hi!").await.expect("write");
    tokio::time::timeout(WAIT, stream.read_exact(&mut buf))
        .await
        .expect("established in time")
        .expect("read");
    let got = tokio::time::timeout(WAIT, heard.recv()).await;
    assert_eq!(got.expect("in time"), Some(b"hi!".to_vec()));
    let short = Duration::from_millis(500);
    cuts.cut("shop", "a", Direction::Egress);
    stream.write_all(b"out").await.expect("write");
    let got = tokio::time::timeout(WAIT, heard.recv()).await;
    assert_eq!(
        got.expect("in time"),
        Some(b"out".to_vec()),
        "egress cut: the pod hears"
    );
    let mut buf = [0u8; 3];
    let reply = tokio::time::timeout(short, stream.read_exact(&mut buf)).await;
    assert!(reply.is_err(), "egress cut: the client hears nothing back");
    cuts.cut("shop", "a", Direction::Ingress);
    // The reply held by the egress cut passes now; what the client sends
    // next does not.
    tokio::time::timeout(WAIT, stream.read_exact(&mut buf))
        .await
        .expect("the held reply arrives")
        .expect("read");
    assert_eq!(&buf, b"out");
    stream.write_all(b"in!").await.expect("write");
    let unheard = tokio::time::timeout(short, heard.recv()).await;
    assert!(unheard.is_err(), "ingress cut: the pod hears nothing");
    cuts.heal("shop", "a");
    let got = tokio::time::timeout(WAIT, heard.recv()).await;
    assert_eq!(got.expect("in time"), Some(b"in!".to_vec()));
}

#[tokio::test]
async fn stopping_the_proxy_closes_its_connections() {
    let (server, _a) = tagged_echo("127.1.200.4", b"A").await;
    let (address, listener, _cuts, connections) = listen().await;
    listener.set_backends(vec![backend(server, "a")]);
    let mut established = connect(address).await;
    assert_eq!(ask_in_time(&mut established, b"1").await, b"A1");
    drop(CloseOnDrop(connections));
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(WAIT, established.read(&mut buf))
        .await
        .expect("closed in time");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
}

#[test]
fn only_ready_addresses_with_the_named_port_are_backends() {
    let endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "shop"},
        "subsets": [{
            "addresses": [{"ip": "127.1.0.3", "targetRef": {"kind": "Pod", "namespace": "shop", "name": "db-1"}}],
            "notReadyAddresses": [{"ip": "127.1.0.2"}],
            "ports": [{"name": "pg", "port": 5432}, {"name": "status", "port": 8000}]
        }]
    }))
    .expect("endpoints");
    let frontend = Frontend {
        service: "shop/db".into(),
        address: "127.0.200.1:5432".parse().expect("addr"),
        port_name: Some("pg".into()),
    };
    assert_eq!(
        backends(&frontend, Some(&endpoints)),
        vec![backend("127.1.0.3:5432".parse().expect("addr"), "db-1")]
    );
}
