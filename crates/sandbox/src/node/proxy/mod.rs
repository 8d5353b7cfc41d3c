//! The Service proxy: each ClusterIP Service listens on its cluster IP (a
//! loopback address in the sandbox; on a real control plane an address of
//! its service range, made local by `addresses`) and ports, and forwards TCP connections to the ready
//! addresses of its Endpoints, round robin.
//!
//! It keeps kube-proxy's connection semantics: Endpoints are followed
//! through a watch, so a pod that turns unready or goes away stops
//! receiving new connections at once, but connections it already has stay
//! open (conntrack keeps established flows on their endpoint; kube-proxy
//! clears conntrack entries only for UDP). A client of an old primary that
//! lost its label keeps talking to it until one side closes, as on a real
//! cluster. `listener` carries connections; `cuts` holds the partitions
//! tests and `tusk sandbox fault` inject between pods and their clients.

mod addresses;
pub mod cuts;
mod endpoints;
mod listener;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::{Api, Client, ResourceExt};
use tokio::net::TcpListener;

use crate::informer::Informer;
pub use addresses::LocalAddresses;
use cuts::ServiceCuts;
use endpoints::EndpointCache;
pub use endpoints::EndpointSource;
use listener::{Backend, Connections, Listener};

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen on {address} for Service {service}: {source}")]
    Listen {
        address: SocketAddr,
        service: String,
        source: std::io::Error,
    },
    #[error("Service {service} not proxied: {source}")]
    Address {
        service: String,
        source: addresses::AddressError,
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

async fn bind(
    frontend: &Frontend,
    cuts: &ServiceCuts,
    connections: &Connections,
    addresses: &mut LocalAddresses,
) -> Result<Listener, ProxyError> {
    addresses
        .ensure(frontend.address.ip())
        .map_err(|error| ProxyError::Address {
            service: frontend.service.clone(),
            source: error,
        })?;
    let listener = TcpListener::bind(frontend.address)
        .await
        .map_err(|source| ProxyError::Listen {
            address: frontend.address,
            service: frontend.service.clone(),
            source,
        })?;
    Ok(Listener::start(listener, cuts.clone(), connections.clone()))
}

/// The Service ports to listen on: Services with a cluster IP, TCP ports
/// only.
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
        if spec.type_.as_deref().is_some_and(|t| t == "ExternalName") {
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
fn backends(frontend: &Frontend, endpoints: Option<&Endpoints>) -> Vec<Backend> {
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
                let pod = address
                    .target_ref
                    .as_ref()
                    .filter(|r| r.kind.as_deref() == Some("Pod"))
                    .and_then(|r| Some((r.namespace.clone()?, r.name.clone()?)));
                out.push(Backend {
                    address: SocketAddr::new(ip, port),
                    pod,
                });
            }
        }
    }
    out.sort();
    out
}

/// Runs the proxy until the task is dropped, which closes every
/// connection it carries and removes the addresses it added.
pub async fn run(
    client: Client,
    cuts: ServiceCuts,
    mut addresses: LocalAddresses,
    source: EndpointSource,
) {
    let services = Informer::start(Api::<Service>::all(client.clone()));
    let endpoints = EndpointCache::start(client, source);
    let (mut service_changes, mut endpoint_changes) =
        (services.changes.clone(), endpoints.changes());
    if services.store.wait_until_ready().await.is_err() || !endpoints.ready().await {
        return;
    }
    let connections = Connections::default();
    let _close_all = CloseOnDrop(connections.clone());
    let mut listeners: BTreeMap<Frontend, Listener> = BTreeMap::new();
    loop {
        let wanted = frontends(&services.store.state());
        listeners.retain(|frontend, _| wanted.contains(frontend));
        addresses.retain(&wanted.iter().map(|f| f.address.ip()).collect());
        let snapshot = endpoints.snapshot();
        for frontend in wanted {
            if !listeners.contains_key(&frontend) {
                match bind(&frontend, &cuts, &connections, &mut addresses).await {
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
                listener.set_backends(snapshot.backends(&frontend));
            }
        }
        tokio::select! {
            _ = service_changes.changed() => {}
            _ = endpoint_changes.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

struct CloseOnDrop(Connections);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .abort_all();
    }
}

#[cfg(test)]
mod tests;
