//! Cutting a pod off from its peers, on the Docker runtime: packets
//! between the pod and every other pod of the sandbox's bridge network are
//! dropped inside the pod's network namespace, both new and established
//! connections, as a network partition between nodes would, while the
//! host (the bridge's gateway: the kubelet's probes, the Service proxy,
//! the operator, the API server's forwarder) still reaches it.
//!
//! The rules are `iptables` rules in chains of their own (`TUSK-PEERS-IN`
//! for what arrives from peers, `TUSK-PEERS-OUT` for what leaves for
//! them), entered with `nsenter` through the process id of one of the
//! pod's containers; they live as long as the pod's network namespace
//! (the pause container), so a container's restart keeps them and a
//! pod created again under the same name starts uncut. The process
//! runtime shares one network namespace among all pods and cannot cut
//! peers.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::node::proxy::cuts::Direction;

const CHAIN_IN: &str = "TUSK-PEERS-IN";
const CHAIN_OUT: &str = "TUSK-PEERS-OUT";

#[derive(Debug, thiserror::Error)]
pub enum PeerCutError {
    #[error(
        "the process runtime cannot cut pods off from each other (they share the host's network namespace); use --runtime docker"
    )]
    Unsupported,
    #[error("cannot run {command:?} in the pod's network namespace: {message}")]
    Command { command: String, message: String },
}

/// The sandbox's pod network: its gateway (the host) and /24.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerNetwork {
    pub gateway: Ipv4Addr,
}

impl PeerNetwork {
    fn subnet(self) -> String {
        let [a, b, c, _] = self.gateway.octets();
        format!("{a}.{b}.{c}.0/24")
    }

    /// The `iptables` argument lists that cut a pod off in `direction`:
    /// loopback and the gateway pass, the rest of the /24 is dropped.
    pub fn cut_rules(self, direction: Direction) -> Vec<Vec<String>> {
        let (subnet, gateway) = (self.subnet(), self.gateway.to_string());
        let mut rules = Vec::new();
        let mut chain = |name: &str, hook: &str, interface: &str, address: &str| {
            let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
            rules.push(args(&["-N", name]));
            rules.push(args(&["-A", name, interface, "lo", "-j", "RETURN"]));
            rules.push(args(&["-A", name, address, &gateway, "-j", "RETURN"]));
            rules.push(args(&["-A", name, address, &subnet, "-j", "DROP"]));
            rules.push(args(&["-I", hook, "1", "-j", name]));
        };
        if matches!(direction, Direction::Ingress | Direction::Both) {
            chain(CHAIN_IN, "INPUT", "-i", "-s");
        }
        if matches!(direction, Direction::Egress | Direction::Both) {
            chain(CHAIN_OUT, "OUTPUT", "-o", "-d");
        }
        rules
    }
}

/// The `iptables` argument lists that remove every cut; each may fail
/// harmlessly when its chain is absent.
pub fn heal_rules() -> Vec<Vec<String>> {
    [(CHAIN_IN, "INPUT"), (CHAIN_OUT, "OUTPUT")]
        .iter()
        .flat_map(|(chain, hook)| {
            [
                vec!["-D".into(), (*hook).into(), "-j".into(), (*chain).into()],
                vec!["-F".into(), (*chain).into()],
                vec!["-X".into(), (*chain).into()],
            ]
        })
        .collect()
}

/// Runs `iptables` with `args` in the network namespace of process `pid`.
fn iptables(pid: i32, args: &[String]) -> Result<(), PeerCutError> {
    let mut command = Command::new("nsenter");
    command
        .arg(format!("--target={pid}"))
        .arg("--net")
        .args(["--", "iptables", "-w", "5"])
        .args(args);
    let described = || format!("iptables {}", args.join(" "));
    let output = command.output().map_err(|e| PeerCutError::Command {
        command: described(),
        message: format!("nsenter: {e}"),
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(PeerCutError::Command {
        command: described(),
        message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// Removes any cut of the pod whose container runs as `pid`.
pub fn heal(pid: i32) {
    for args in heal_rules() {
        // A chain that was never made fails to be removed: nothing to heal.
        let _ = iptables(pid, &args);
    }
}

/// Cuts the pod whose container runs as `pid` off from its peers in
/// `direction`, replacing an earlier cut.
pub fn cut(network: PeerNetwork, pid: i32, direction: Direction) -> Result<(), PeerCutError> {
    heal(pid);
    for args in network.cut_rules(direction) {
        if let Err(error) = iptables(pid, &args) {
            heal(pid);
            return Err(error);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network() -> PeerNetwork {
        PeerNetwork {
            gateway: Ipv4Addr::new(10, 130, 7, 1),
        }
    }

    fn joined(rules: &[Vec<String>]) -> Vec<String> {
        rules.iter().map(|r| r.join(" ")).collect()
    }

    #[test]
    fn an_ingress_cut_drops_what_peers_send_but_lets_the_host_and_loopback_through() {
        assert_eq!(
            joined(&network().cut_rules(Direction::Ingress)),
            [
                "-N TUSK-PEERS-IN",
                "-A TUSK-PEERS-IN -i lo -j RETURN",
                "-A TUSK-PEERS-IN -s 10.130.7.1 -j RETURN",
                "-A TUSK-PEERS-IN -s 10.130.7.0/24 -j DROP",
                "-I INPUT 1 -j TUSK-PEERS-IN",
            ]
        );
    }

    #[test]
    fn an_egress_cut_drops_what_the_pod_sends_to_peers() {
        assert_eq!(
            joined(&network().cut_rules(Direction::Egress)),
            [
                "-N TUSK-PEERS-OUT",
                "-A TUSK-PEERS-OUT -o lo -j RETURN",
                "-A TUSK-PEERS-OUT -d 10.130.7.1 -j RETURN",
                "-A TUSK-PEERS-OUT -d 10.130.7.0/24 -j DROP",
                "-I OUTPUT 1 -j TUSK-PEERS-OUT",
            ]
        );
    }

    #[test]
    fn a_cut_both_ways_makes_both_chains_and_healing_removes_both() {
        let both = joined(&network().cut_rules(Direction::Both));
        assert_eq!(both.len(), 10);
        assert!(both.contains(&"-I INPUT 1 -j TUSK-PEERS-IN".to_owned()));
        assert!(both.contains(&"-I OUTPUT 1 -j TUSK-PEERS-OUT".to_owned()));
        let heal = joined(&heal_rules());
        for chain in ["TUSK-PEERS-IN", "TUSK-PEERS-OUT"] {
            assert!(heal.contains(&format!("-X {chain}")), "{heal:?}");
        }
    }
}
