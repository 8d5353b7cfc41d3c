//! Where a Service's backends come from: its Endpoints object (all the
//! sandbox's endpoints controller writes) or its EndpointSlices (what
//! kube-proxy reads, and what a real control plane's
//! kube-controller-manager keeps current; kube-apiserver 1.33 and later
//! call Endpoints deprecated). Either way a backend is a ready address
//! with the port of the Service port's name.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use super::listener::Backend;
use super::{Frontend, backends};
use crate::informer::Informer;

/// The label naming an EndpointSlice's Service.
const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Which objects the proxy reads backends from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EndpointSource {
    /// Endpoints (the sandbox's API server serves no EndpointSlices).
    #[default]
    Endpoints,
    /// EndpointSlices, as kube-proxy reads them.
    EndpointSlices,
}

/// The cache of the chosen objects.
pub(super) enum EndpointCache {
    Endpoints(Informer<Endpoints>),
    Slices(Informer<EndpointSlice>),
}

/// The objects of every Service, by `namespace/name`.
pub(super) enum Snapshot {
    Endpoints(BTreeMap<String, Arc<Endpoints>>),
    Slices(BTreeMap<String, Vec<Arc<EndpointSlice>>>),
}

impl EndpointCache {
    pub fn start(client: Client, source: EndpointSource) -> Self {
        match source {
            EndpointSource::Endpoints => Self::Endpoints(Informer::start(Api::all(client))),
            EndpointSource::EndpointSlices => Self::Slices(Informer::start(Api::all(client))),
        }
    }

    /// Waits for the first listing; false when the watch ended.
    pub async fn ready(&self) -> bool {
        match self {
            Self::Endpoints(informer) => informer.store.wait_until_ready().await.is_ok(),
            Self::Slices(informer) => informer.store.wait_until_ready().await.is_ok(),
        }
    }

    pub fn changes(&self) -> watch::Receiver<u64> {
        match self {
            Self::Endpoints(informer) => informer.changes.clone(),
            Self::Slices(informer) => informer.changes.clone(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let key = |namespace: Option<String>, name: &str| {
            format!("{}/{name}", namespace.unwrap_or_default())
        };
        match self {
            Self::Endpoints(informer) => Snapshot::Endpoints(
                informer
                    .store
                    .state()
                    .into_iter()
                    .map(|e| (key(e.namespace(), &e.name_any()), e))
                    .collect(),
            ),
            Self::Slices(informer) => {
                let mut by_service: BTreeMap<String, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
                for slice in informer.store.state() {
                    if let Some(service) = slice.labels().get(SERVICE_NAME) {
                        let service = key(slice.namespace(), service);
                        by_service.entry(service).or_default().push(slice);
                    }
                }
                Snapshot::Slices(by_service)
            }
        }
    }
}

impl Snapshot {
    /// The ready backends of one Service port.
    pub fn backends(&self, frontend: &Frontend) -> Vec<Backend> {
        match self {
            Self::Endpoints(all) => {
                backends(frontend, all.get(&frontend.service).map(|e| e.as_ref()))
            }
            Self::Slices(all) => slice_backends(
                frontend,
                all.get(&frontend.service).map_or(&[][..], Vec::as_slice),
            ),
        }
    }
}

/// The ready backends of one Service port in its EndpointSlices: ready
/// endpoints (an unset `ready` counts as ready, as the API documents it),
/// at the port of the Service port's name.
fn slice_backends(frontend: &Frontend, slices: &[Arc<EndpointSlice>]) -> Vec<Backend> {
    let mut out = Vec::new();
    for slice in slices {
        let port = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name == frontend.port_name)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        for endpoint in &slice.endpoints {
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            let Some(ip) = endpoint
                .addresses
                .first()
                .and_then(|a| a.parse::<IpAddr>().ok())
            else {
                continue;
            };
            if !ready {
                continue;
            }
            let pod = endpoint
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
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ready_endpoints_of_every_slice_at_the_named_port_are_backends() {
        let slice = |name: &str, endpoints: serde_json::Value| -> Arc<EndpointSlice> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": "shop",
                                 "labels": {SERVICE_NAME: "db-rw"}},
                    "addressType": "IPv4",
                    "ports": [{"name": "postgres", "port": 5432}, {"name": "metrics", "port": 9187}],
                    "endpoints": endpoints,
                }))
                .expect("a slice"),
            )
        };
        let slices = [
            slice(
                "db-rw-a",
                json!([
                    {"addresses": ["10.128.0.2"], "conditions": {"ready": true},
                     "targetRef": {"kind": "Pod", "namespace": "shop", "name": "db-1"}},
                    {"addresses": ["10.128.0.3"], "conditions": {"ready": false}},
                ]),
            ),
            slice("db-rw-b", json!([{"addresses": ["10.128.0.4"]}])),
        ];
        let frontend = Frontend {
            service: "shop/db-rw".into(),
            address: "10.96.0.10:5432".parse().expect("an address"),
            port_name: Some("postgres".into()),
        };
        let found = slice_backends(&frontend, &slices);
        let addresses: Vec<String> = found.iter().map(|b| b.address.to_string()).collect();
        assert_eq!(addresses, ["10.128.0.2:5432", "10.128.0.4:5432"]);
        assert_eq!(found[0].pod, Some(("shop".into(), "db-1".into())));
    }
}
