//! The sandbox's bridge network: one /24 in 10.128.0.0/9, chosen from the
//! sandbox id so that sandboxes side by side (tests) rarely try the same
//! one, and the next candidate taken when the engine reports an overlap.
//! The gateway (`.1`) is the host's address on the bridge; pods take
//! `.2` to `.254`.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use bollard::Docker;
use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};

use super::{DockerError, SANDBOX_LABEL, engine};

/// How many /24s are tried before giving up.
const ATTEMPTS: u32 = 16;

fn subnet(id: &str, attempt: u32) -> [u8; 3] {
    let seed = u32::from_str_radix(&id[id.len().saturating_sub(6)..], 16).unwrap_or(0);
    let index = (seed.wrapping_add(attempt.wrapping_mul(7919))) % (128 * 256);
    [10, 128 + (index / 256) as u8, (index % 256) as u8]
}

/// The pod address range of the /24 whose gateway is `gateway`.
fn range(gateway: Ipv4Addr) -> (Ipv4Addr, Ipv4Addr) {
    let [a, b, c, _] = gateway.octets();
    (Ipv4Addr::new(a, b, c, 2), Ipv4Addr::new(a, b, c, 254))
}

/// The network's name, gateway and pod address range, creating it unless
/// it exists from an earlier start.
pub async fn ensure(
    docker: &Docker,
    id: &str,
) -> Result<(String, Ipv4Addr, (Ipv4Addr, Ipv4Addr)), DockerError> {
    let name = format!("tusk-{id}");
    if let Ok(existing) = docker.inspect_network(&name, None).await {
        let gateway = existing
            .ipam
            .and_then(|ipam| ipam.config)
            .into_iter()
            .flatten()
            .find_map(|config| config.gateway?.parse::<Ipv4Addr>().ok());
        if let Some(gateway) = gateway {
            return Ok((name, gateway, range(gateway)));
        }
        docker.remove_network(&name).await.map_err(engine(format!(
            "removing the network {name} without a gateway"
        )))?;
    }
    let mut last_error = String::new();
    for attempt in 0..ATTEMPTS {
        let [a, b, c] = subnet(id, attempt);
        let gateway = Ipv4Addr::new(a, b, c, 1);
        let request = NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            ipam: Some(Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(format!("{a}.{b}.{c}.0/24")),
                    gateway: Some(gateway.to_string()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            labels: Some(HashMap::from([(SANDBOX_LABEL.to_owned(), id.to_owned())])),
            ..Default::default()
        };
        match docker.create_network(request).await {
            Ok(_) => return Ok((name, gateway, range(gateway))),
            Err(error) => last_error = error.to_string(),
        }
    }
    Err(DockerError::NoSubnet(last_error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_stay_in_the_private_range_and_differ_by_attempt() {
        let first = subnet("0123456789ab", 0);
        let second = subnet("0123456789ab", 1);
        assert_ne!(first, second);
        for [a, b, _] in [first, second] {
            assert_eq!(a, 10);
            assert!(b >= 128);
        }
        assert_eq!(
            range(Ipv4Addr::new(10, 130, 4, 1)),
            (Ipv4Addr::new(10, 130, 4, 2), Ipv4Addr::new(10, 130, 4, 254))
        );
    }
}
