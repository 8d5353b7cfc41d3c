//! One listening Service port: accepts connections and forwards each to
//! a backend chosen round robin among the current ready endpoints.
//!
//! Like kube-proxy's iptables and IPVS modes, the choice is made once, when
//! the connection opens (conntrack then keeps the flow on that endpoint):
//! a changed endpoint list affects only new connections, and an endpoint
//! that leaves keeps its established connections until either end closes
//! them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::cuts::{PodKey, ServiceCuts};

/// Where a connection may go: an endpoint address and the pod behind it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Backend {
    pub address: SocketAddr,
    pub pod: Option<PodKey>,
}

/// The proxy's open connections, closed together when the proxy stops.
pub type Connections = Arc<std::sync::Mutex<JoinSet<()>>>;

/// A listening Service port and its current backends. Dropping it stops
/// accepting; connections already made carry on.
pub struct Listener {
    backends: Arc<RwLock<Vec<Backend>>>,
    task: JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    pub fn start(listener: TcpListener, cuts: ServiceCuts, connections: Connections) -> Self {
        let backends: Arc<RwLock<Vec<Backend>>> = Arc::default();
        let task = tokio::spawn(accept(listener, backends.clone(), cuts, connections));
        Self { backends, task }
    }

    /// The endpoints new connections go to.
    pub fn set_backends(&self, backends: Vec<Backend>) {
        *self
            .backends
            .write()
            .unwrap_or_else(PoisonError::into_inner) = backends;
    }
}

async fn accept(
    listener: TcpListener,
    backends: Arc<RwLock<Vec<Backend>>>,
    cuts: ServiceCuts,
    connections: Connections,
) {
    let turn = AtomicUsize::new(0);
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let backend = {
            let backends = backends.read().unwrap_or_else(PoisonError::into_inner);
            if backends.is_empty() {
                // No ready endpoint: refuse, as kube-proxy's REJECT rule does.
                continue;
            }
            backends[turn.fetch_add(1, Ordering::Relaxed) % backends.len()].clone()
        };
        let mut open = connections.lock().unwrap_or_else(PoisonError::into_inner);
        // Reap finished connections so the set does not grow without end.
        while open.try_join_next().is_some() {}
        open.spawn(forward(client, backend, cuts.clone()));
    }
}

/// Carries one connection until either end closes it. While the backend's
/// pod is cut off, the handshake waits and bytes in a cut direction are
/// held back, as a partitioned network drops packets that TCP resends once
/// it heals.
async fn forward(client: TcpStream, backend: Backend, cuts: ServiceCuts) {
    let pod = backend.pod.as_ref();
    cuts.connectable(pod).await;
    let connect = TcpStream::connect(backend.address);
    let Ok(Ok(server)) = tokio::time::timeout(Duration::from_secs(5), connect).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(client_read, server_write, &cuts, pod, true),
        pump(server_read, client_write, &cuts, pod, false),
    );
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cuts: &ServiceCuts,
    pod: Option<&PodKey>,
    to_pod: bool,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        cuts.passable(pod, to_pod).await;
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
