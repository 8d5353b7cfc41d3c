//! Services: a cluster IP from 127.1.0.0/16 for each Service that needs
//! one, and the defaults and immutable fields of
//! [`crate::apiserver::admission::defaults`].

use std::collections::HashSet;

use serde_json::Value;

use super::KindRules;
use crate::apiserver::admission::defaults;
use crate::apiserver::error::{ApiError, Cause};
use crate::apiserver::objects::meta::str_at;
use crate::apiserver::storage::Transaction;

/// The Service through which in-cluster clients reach the API server
/// (kept by [`crate::controllers::kubernetes_service`]); the allocator
/// hands out addresses from its block first.
pub const KUBERNETES_NAME: &str = "kubernetes";
pub const KUBERNETES_NAMESPACE: &str = "default";

pub struct Service;

impl KindRules for Service {
    fn created(
        &self,
        tx: &Transaction<'_>,
        _name: &str,
        _now: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        let ip = if defaults::service_needs_ip(object) {
            Some(allocate_cluster_ip(tx)?)
        } else {
            None
        };
        defaults::service(object, ip);
        Ok(())
    }

    fn updated(&self, old: &Value, object: &mut Value, _status: bool, causes: &mut Vec<Cause>) {
        defaults::service_update(old, object, causes);
        defaults::service(object, None);
    }
}

/// The first loopback address no Service holds, so each Service can be
/// reached on its own address with its own ports. The search starts in
/// the block of the `kubernetes` Service (`127.1.<n>.0/24`, `n` derived
/// from the sandbox's data directory): two sandboxes on one machine (tests
/// running side by side) then hand out different addresses, and one
/// sandbox's proxy never answers for another's Service.
fn allocate_cluster_ip(tx: &Transaction<'_>) -> Result<String, ApiError> {
    let services = tx.list("/services", None);
    let used: HashSet<String> = services
        .iter()
        .filter_map(|s| str_at(s, "/spec/clusterIP").map(str::to_owned))
        .collect();
    let own_block = services
        .iter()
        .find(|s| {
            str_at(s, "/metadata/name") == Some(KUBERNETES_NAME)
                && str_at(s, "/metadata/namespace") == Some(KUBERNETES_NAMESPACE)
        })
        .and_then(|s| str_at(s, "/spec/clusterIP"))
        .and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok())
        .map_or(0, |ip| u16::from(ip.octets()[2]));
    for block in 0..=255u16 {
        let third = (own_block + block) % 256;
        for fourth in 1..=254u16 {
            let ip = format!("127.1.{third}.{fourth}");
            if !used.contains(&ip) {
                return Ok(ip);
            }
        }
    }
    Err(ApiError::internal(
        "the cluster IP range 127.1.0.0/16 is full",
    ))
}
