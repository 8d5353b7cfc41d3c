//! The Service proxy: each ClusterIP Service listens on its cluster IP (a
//! loopback address) and ports, and forwards TCP connections to the ready
//! addresses of its Endpoints, round robin.
//!
//! Endpoints are followed through a watch, so a pod that turns unready or
//! goes away stops receiving new connections at once; its open connections
//! are closed too, as when a real node's conntrack entries are flushed, so
//! clients notice the move (a failover) instead of talking to a stale
//! backend.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::{Api, Client, ResourceExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

use crate::informer::Informer;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen on {address} for Service {service}: {source}")]
    Listen {
        address: SocketAddr,
        service: String,
        source: std::io::Error,
    },
}

/// One Service port: where it listens and the endpoint port name it maps
/// to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Frontend {
    service: String,
    address: SocketAddr,
    port_name: Option<String>,
}

#[derive(Default)]
struct Connections {
    next: u64,
    open: BTreeMap<u64, (SocketAddr, AbortHandle)>,
}

/// A listening Service port and its current backends.
struct Listener {
    backends: Arc<RwLock<Vec<SocketAddr>>>,
    connections: Arc<Mutex<Connections>>,
    task: JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
        let connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (_, handle) in connections.open.values() {
            handle.abort();
        }
    }
}

impl Listener {
    async fn bind(frontend: &Frontend) -> Result<Self, ProxyError> {
        let listener = TcpListener::bind(frontend.address)
            .await
            .map_err(|source| ProxyError::Listen {
                address: frontend.address,
                service: frontend.service.clone(),
                source,
            })?;
        let backends: Arc<RwLock<Vec<SocketAddr>>> = Arc::default();
        let connections: Arc<Mutex<Connections>> = Arc::default();
        let task = tokio::spawn(accept(listener, backends.clone(), connections.clone()));
        Ok(Self {
            backends,
            connections,
            task,
        })
    }

    /// Sets the backends and closes connections to those that left.
    fn set_backends(&self, backends: Vec<SocketAddr>) {
        let keep: BTreeSet<SocketAddr> = backends.iter().copied().collect();
        *self
            .backends
            .write()
            .unwrap_or_else(PoisonError::into_inner) = backends;
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        connections.open.retain(|_, (backend, handle)| {
            let stays = keep.contains(backend);
            if !stays {
                handle.abort();
            }
            stays
        });
    }
}

async fn accept(
    listener: TcpListener,
    backends: Arc<RwLock<Vec<SocketAddr>>>,
    connections: Arc<Mutex<Connections>>,
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
            backends[turn.fetch_add(1, Ordering::Relaxed) % backends.len()]
        };
        let mut guard = connections.lock().unwrap_or_else(PoisonError::into_inner);
        let id = guard.next;
        guard.next += 1;
        let registry = connections.clone();
        let task = tokio::spawn(async move {
            forward(client, backend).await;
            registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .open
                .remove(&id);
        });
        guard.open.insert(id, (backend, task.abort_handle()));
    }
}

async fn forward(mut client: TcpStream, backend: SocketAddr) {
    let connect = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(backend)).await;
    if let Ok(Ok(mut server)) = connect {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}

/// The Service ports to listen on: ClusterIP Services with a loopback
/// cluster IP, TCP ports only.
fn frontends(services: &[Arc<Service>]) -> BTreeSet<Frontend> {
    let mut out = BTreeSet::new();
    for service in services {
        let Some(spec) = &service.spec else { continue };
        let Some(ip) = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse::<IpAddr>().ok())
        else {
            continue;
        };
        if !ip.is_loopback() || spec.type_.as_deref().is_some_and(|t| t == "ExternalName") {
            continue;
        }
        for port in spec.ports.iter().flatten() {
            if port.protocol.as_deref().unwrap_or("TCP") != "TCP" {
                continue;
            }
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            out.insert(Frontend {
                service: format!(
                    "{}/{}",
                    service.namespace().unwrap_or_default(),
                    service.name_any()
                ),
                address: SocketAddr::new(ip, number),
                port_name: port.name.clone(),
            });
        }
    }
    out
}

/// The ready backends of one Service port.
fn backends(frontend: &Frontend, endpoints: Option<&Endpoints>) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for subset in endpoints
        .and_then(|e| e.subsets.as_ref())
        .into_iter()
        .flatten()
    {
        let port = subset
            .ports
            .iter()
            .flatten()
            .find(|p| {
                p.name == frontend.port_name
                    || subset.ports.as_ref().is_some_and(|ports| ports.len() == 1)
            })
            .and_then(|p| u16::try_from(p.port).ok());
        let Some(port) = port else { continue };
        for address in subset.addresses.iter().flatten() {
            if let Ok(ip) = address.ip.parse::<IpAddr>() {
                out.push(SocketAddr::new(ip, port));
            }
        }
    }
    out.sort();
    out
}

/// Runs the proxy until the task is dropped.
pub async fn run(client: Client) {
    let services = Informer::start(Api::<Service>::all(client.clone()));
    let endpoints = Informer::start(Api::<Endpoints>::all(client.clone()));
    let (mut service_changes, mut endpoint_changes) =
        (services.changes.clone(), endpoints.changes.clone());
    if services.store.wait_until_ready().await.is_err()
        || endpoints.store.wait_until_ready().await.is_err()
    {
        return;
    }
    let mut listeners: BTreeMap<Frontend, Listener> = BTreeMap::new();
    loop {
        let wanted = frontends(&services.store.state());
        listeners.retain(|frontend, _| wanted.contains(frontend));
        let by_name: BTreeMap<String, Arc<Endpoints>> = endpoints
            .store
            .state()
            .into_iter()
            .map(|e| {
                (
                    format!("{}/{}", e.namespace().unwrap_or_default(), e.name_any()),
                    e,
                )
            })
            .collect();
        for frontend in wanted {
            if !listeners.contains_key(&frontend) {
                match Listener::bind(&frontend).await {
                    Ok(listener) => {
                        listeners.insert(frontend.clone(), listener);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "Service port not proxied; retrying");
                        continue;
                    }
                }
            }
            if let Some(listener) = listeners.get(&frontend) {
                listener.set_backends(backends(
                    &frontend,
                    by_name.get(&frontend.service).map(|e| e.as_ref()),
                ));
            }
        }
        tokio::select! {
            _ = service_changes.changed() => {}
            _ = endpoint_changes.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn echo_server(ip: &str) -> (SocketAddr, JoinHandle<()>) {
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
                        if n == 0 || socket.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (address, task)
    }

    fn free_frontend() -> Frontend {
        let probe = std::net::TcpListener::bind("127.0.200.1:0").expect("free port");
        let address = probe.local_addr().expect("addr");
        drop(probe);
        Frontend {
            service: "shop/db".into(),
            address,
            port_name: None,
        }
    }

    async fn round_trip(address: SocketAddr, text: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(text).await?;
        let mut buf = vec![0u8; text.len()];
        stream.read_exact(&mut buf).await?;
        Ok(buf)
    }

    #[tokio::test]
    async fn connections_follow_backends_and_close_when_one_leaves() {
        let (backend, _server) = echo_server("127.1.200.1").await;
        let frontend = free_frontend();
        let listener = Listener::bind(&frontend).await.expect("listen");
        let refused =
            tokio::time::timeout(Duration::from_secs(5), round_trip(frontend.address, b"x")).await;
        assert!(!matches!(refused, Ok(Ok(_))), "no backend, no conversation");
        listener.set_backends(vec![backend]);
        let echoed = tokio::time::timeout(
            Duration::from_secs(5),
            round_trip(frontend.address, b"hello"),
        )
        .await
        .expect("in time")
        .expect("echo through the proxy");
        assert_eq!(echoed, b"hello");
        let mut open = TcpStream::connect(frontend.address).await.expect("connect");
        open.write_all(b"ping").await.expect("write");
        let mut buf = [0u8; 4];
        open.read_exact(&mut buf).await.expect("echo");
        listener.set_backends(Vec::new());
        let closed = tokio::time::timeout(Duration::from_secs(5), open.read(&mut buf))
            .await
            .expect("closed in time");
        assert!(
            matches!(closed, Ok(0) | Err(_)),
            "connection to a departed backend is closed"
        );
    }

    #[test]
    fn only_ready_addresses_with_the_named_port_are_backends() {
        let endpoints: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "shop"},
            "subsets": [{
                "addresses": [{"ip": "127.1.0.3"}],
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
            vec!["127.1.0.3:5432".parse::<SocketAddr>().expect("addr")]
        );
    }
}
