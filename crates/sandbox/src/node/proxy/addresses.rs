//! Service addresses that are not loopback ones, made local so the proxy
//! can listen on them.
//!
//! The sandbox's API server gives Services loopback cluster IPs, which
//! every process can bind. A real control plane gives them addresses of
//! its service range (kube-up: 10.96.0.0/16); kube-proxy's IPVS mode puts
//! each on a dummy interface of its own (`kube-ipvs0`) so the host accepts
//! their traffic. The proxy does the same on `lo` (dummy interfaces need a
//! kernel module a machine may lack), each address with the label
//! `lo:tusk<id>`, so that a node removes its own addresses and only those:
//! when the Service goes, when the proxy stops, and at the next start
//! after a run that was killed. Pods on the Docker runtime reach them
//! through the bridge's gateway, as any local address. Adding addresses
//! needs root (CAP_NET_ADMIN).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::process::{Command, Stdio};

/// The non-loopback addresses this node's proxy put on `lo`.
#[derive(Debug)]
pub struct LocalAddresses {
    label: String,
    added: BTreeSet<IpAddr>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "cannot add the Service address {address} to lo (the proxy needs root for a real control plane's service range): {detail}"
)]
pub struct AddressError {
    address: IpAddr,
    detail: String,
}

fn ip(args: &[&str]) -> Result<String, String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

/// The `ip addr` argument for one address.
fn host_prefix(address: IpAddr) -> String {
    match address {
        IpAddr::V4(_) => format!("{address}/32"),
        IpAddr::V6(_) => format!("{address}/128"),
    }
}

/// The addresses of `ip -o addr show` output.
fn listed_addresses(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.find(|w| *w == "inet" || *w == "inet6")?;
            words.next().map(str::to_owned)
        })
        .collect()
}

impl LocalAddresses {
    /// The addresses of the node `id` (8 characters are kept), removing
    /// any a killed run of it left.
    pub fn new(id: &str) -> Self {
        let short: String = id.chars().take(8).collect();
        let addresses = Self {
            label: format!("lo:tusk{short}"),
            added: BTreeSet::new(),
        };
        if let Ok(text) = ip(&["-o", "addr", "show", "dev", "lo", "label", &addresses.label]) {
            for address in listed_addresses(&text) {
                let _ = ip(&["addr", "del", &address, "dev", "lo"]);
            }
        }
        addresses
    }

    /// Makes `address` local unless it is a loopback one (nothing to do)
    /// or already added.
    pub fn ensure(&mut self, address: IpAddr) -> Result<(), AddressError> {
        if address.is_loopback() || self.added.contains(&address) {
            return Ok(());
        }
        let prefix = host_prefix(address);
        let mut args = vec!["addr", "add", &prefix, "dev", "lo"];
        if address.is_ipv4() {
            args.extend(["label", &self.label]);
        }
        match ip(&args) {
            Ok(_) => {
                self.added.insert(address);
                Ok(())
            }
            // Another node's proxy has it; binding will say whether the
            // port is free.
            Err(detail) if detail.contains("File exists") => Ok(()),
            Err(detail) => Err(AddressError { address, detail }),
        }
    }

    /// Removes the addresses not in `wanted`.
    pub fn retain(&mut self, wanted: &BTreeSet<IpAddr>) {
        let gone: Vec<IpAddr> = self.added.difference(wanted).copied().collect();
        for address in gone {
            self.remove(address);
        }
    }

    fn remove(&mut self, address: IpAddr) {
        if let Err(detail) = ip(&["addr", "del", &host_prefix(address), "dev", "lo"]) {
            tracing::warn!(%address, %detail, "cannot remove a Service address from lo");
        }
        self.added.remove(&address);
    }
}

impl Drop for LocalAddresses {
    fn drop(&mut self) {
        self.retain(&BTreeSet::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_from_ip_s_one_line_output() {
        let text = "1: lo    inet 10.96.0.10/32 scope global lo:tusk0123abcd\\       valid_lft forever\n\
                    1: lo    inet 10.96.4.2/32 scope global lo:tusk0123abcd\\       valid_lft forever\n";
        assert_eq!(listed_addresses(text), ["10.96.0.10/32", "10.96.4.2/32"]);
    }

    #[test]
    fn loopback_addresses_need_nothing() {
        let mut addresses = LocalAddresses {
            label: "lo:tusktest".into(),
            added: BTreeSet::new(),
        };
        addresses
            .ensure("127.1.0.5".parse().expect("an address"))
            .expect("nothing to add");
        assert!(addresses.added.is_empty());
    }
}
