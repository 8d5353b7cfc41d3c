//! The `kubernetes` Service in `default` and its Endpoints, as
//! kube-apiserver's own controller keeps them: in-cluster clients reach the
//! API server at `KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`, the
//! Service's cluster IP and port 443, which the node's proxy forwards to
//! the API server's loopback address and current port.
//!
//! kube-apiserver reserves the first address of the service range for this
//! Service. Every sandbox on a machine shares 127.1.0.0/16, so each takes
//! the first address of a /24 chosen from its data directory
//! (`127.1.<1..=255>.1`): two sandboxes side by side (tests) rarely want the
//! same one. An address another Service already holds (a data directory
//! from before) is left to it, and the Service gets one from the allocator.
//! The address is kept once the Service exists, and the API server's
//! certificate names it.

use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::{Value, json};

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::error::ApiError;
use crate::apiserver::objects::kinds::service::{
    KUBERNETES_NAME as NAME, KUBERNETES_NAMESPACE as NAMESPACE,
};
use crate::apiserver::objects::{self, Manage, WriteOptions, str_at};
use crate::apiserver::state::Api;
use crate::apiserver::storage::{ObjectKey, Store, Transaction};

/// The port in-cluster clients use.
pub const PORT: u16 = 443;

const MANAGER: &str = "kube-apiserver";

/// The address the Service has, or the one it will get.
pub fn cluster_ip(store: &Store, data_dir: &Path) -> Ipv4Addr {
    let key = ObjectKey::new("/services", NAMESPACE, NAME);
    if let Ok(Some(service)) = store.get(&key)
        && let Some(ip) = str_at(&service, "/spec/clusterIP").and_then(|ip| ip.parse().ok())
    {
        return ip;
    }
    preferred_ip(data_dir)
}

/// `127.1.<n>.1` with `n` in 1..=255 derived from the data directory.
pub fn preferred_ip(data_dir: &Path) -> Ipv4Addr {
    let hash = data_dir
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let block = (hash % 255) as u8 + 1;
    Ipv4Addr::new(127, 1, block, 1)
}

fn options() -> WriteOptions<'static> {
    WriteOptions {
        manage: Manage::Update(MANAGER),
        dry_run: false,
        validation: FieldValidation::Strict,
        user: None,
    }
}

/// Creates or updates the Service (at `ip` unless another Service holds
/// it) and its Endpoints (the API server at 127.0.0.1:`port`).
pub fn reconcile(api: &Api, ip: Ipv4Addr, port: u16) -> Result<(), ApiError> {
    api.store.mutate(|tx| {
        let taken = tx.list("/services", None).iter().any(|s| {
            str_at(s, "/spec/clusterIP") == Some(&ip.to_string())
                && !(str_at(s, "/metadata/name") == Some(NAME)
                    && str_at(s, "/metadata/namespace") == Some(NAMESPACE))
        });
        let ip = if taken { String::new() } else { ip.to_string() };
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "sessionAffinity": "None",
                "ports": [{"name": "https", "port": PORT, "protocol": "TCP", "targetPort": port}]}
        });
        ensure(api, tx, "/services", service)?;
        let endpoints = json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": NAME, "namespace": NAMESPACE,
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
        });
        ensure(api, tx, "/endpoints", endpoints)
    })
}

/// Creates `desired`, or updates the stored object's labels, spec and
/// subsets to it (keeping an allocated cluster IP).
fn ensure(
    api: &Api,
    tx: &mut Transaction<'_>,
    resource_key: &str,
    desired: Value,
) -> Result<(), ApiError> {
    let Some(resource) = api.registry.by_key(resource_key) else {
        return Err(ApiError::internal(format!("{resource_key} is not served")));
    };
    let key = ObjectKey::new(resource_key, NAMESPACE, NAME);
    let Some(current) = tx.get(&key) else {
        objects::create(
            api,
            tx,
            &resource,
            "v1",
            Some(NAMESPACE),
            desired,
            &options(),
        )?;
        return Ok(());
    };
    let mut object = (*current).clone();
    object["metadata"]["labels"] = desired["metadata"]["labels"].clone();
    if let Some(subsets) = desired.get("subsets") {
        object["subsets"] = subsets.clone();
    }
    if let Some(spec) = desired.get("spec") {
        let kept_ip = object.pointer("/spec/clusterIP").cloned();
        object["spec"]["ports"] = spec["ports"].clone();
        if let Some(ip) = kept_ip {
            object["spec"]["clusterIP"] = ip;
        }
    }
    if object != *current {
        objects::update(
            api,
            tx,
            &resource,
            "v1",
            &key,
            object,
            false,
            false,
            &options(),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_address_is_the_first_of_a_block_chosen_by_the_data_directory() {
        let a = preferred_ip(Path::new("/tmp/a"));
        let b = preferred_ip(Path::new("/tmp/b"));
        for ip in [a, b] {
            let [first, second, third, fourth] = ip.octets();
            assert_eq!((first, second, fourth), (127, 1, 1));
            assert_ne!(third, 0, "127.1.0.x is where the allocator starts");
        }
        assert_ne!(a, b);
        assert_eq!(a, preferred_ip(Path::new("/tmp/a")), "stable");
    }
}
