//! Role convergence as a pure decision: from the desired state and what the
//! data directory shows, the one action that brings the instance closer.
//! `convergence` carries the action out.

use std::net::IpAddr;

use crate::desired::DesiredState;

/// What the data directory shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalState {
    /// `PGDATA` holds a cluster.
    pub initialized: bool,
    /// `standby.signal` is present: PostgreSQL starts as a standby.
    pub standby: bool,
}

/// The next thing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stop PostgreSQL and keep it stopped.
    Fence,
    /// Create a new cluster: this instance is the target primary.
    Initdb,
    /// Clone the primary at this address.
    Clone(IpAddr),
    /// No data and nothing to clone from yet.
    AwaitPrimary,
    /// Run as the primary.
    RunPrimary,
    /// Run the standby and promote it.
    Promote,
    /// A former primary: stop now, and rejoin the new primary once its
    /// address is known and it accepts writes.
    Demote(Option<IpAddr>),
    /// Run as a standby of the primary at this address; with no address,
    /// keep the configuration it has.
    RunStandby(Option<IpAddr>),
    /// A primary while no target is chosen: keep what runs, start nothing
    /// (a former primary started blindly could accept writes).
    HoldPrimary,
}

/// The action for instance `me`.
pub fn plan(me: &str, desired: &DesiredState, local: LocalState) -> Action {
    if desired.fenced {
        return Action::Fence;
    }
    let target = desired.target_primary.as_deref();
    let is_target = target == Some(me);
    let address = desired.primary_address;
    match (local.initialized, local.standby) {
        (false, _) if is_target => Action::Initdb,
        (false, _) => match (target, address) {
            (Some(_), Some(address)) => Action::Clone(address),
            _ => Action::AwaitPrimary,
        },
        (true, false) if is_target => Action::RunPrimary,
        (true, false) if target.is_some() => Action::Demote(address),
        (true, false) => Action::HoldPrimary,
        (true, true) if is_target => Action::Promote,
        (true, true) => Action::RunStandby(address.filter(|_| target.is_some())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: LocalState = LocalState {
        initialized: false,
        standby: false,
    };
    const PRIMARY: LocalState = LocalState {
        initialized: true,
        standby: false,
    };
    const STANDBY: LocalState = LocalState {
        initialized: true,
        standby: true,
    };

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn desired(target: Option<&str>, address: Option<IpAddr>, fenced: bool) -> DesiredState {
        DesiredState {
            primary_address: address,
            fenced,
            ..DesiredState::new(target)
        }
    }

    #[test]
    fn every_situation_has_one_action() {
        let cases = [
            // (target, address, fenced, local, expected)
            (Some("db-1"), Some(ip(1)), true, PRIMARY, Action::Fence),
            (None, None, true, EMPTY, Action::Fence),
            (Some("db-1"), None, false, EMPTY, Action::Initdb),
            (
                Some("db-2"),
                Some(ip(2)),
                false,
                EMPTY,
                Action::Clone(ip(2)),
            ),
            (Some("db-2"), None, false, EMPTY, Action::AwaitPrimary),
            (None, None, false, EMPTY, Action::AwaitPrimary),
            (
                Some("db-1"),
                Some(ip(1)),
                false,
                PRIMARY,
                Action::RunPrimary,
            ),
            (Some("db-1"), Some(ip(1)), false, STANDBY, Action::Promote),
            (
                Some("db-2"),
                Some(ip(2)),
                false,
                PRIMARY,
                Action::Demote(Some(ip(2))),
            ),
            (Some("db-2"), None, false, PRIMARY, Action::Demote(None)),
            (None, None, false, PRIMARY, Action::HoldPrimary),
            (
                Some("db-2"),
                Some(ip(2)),
                false,
                STANDBY,
                Action::RunStandby(Some(ip(2))),
            ),
            (Some("db-2"), None, false, STANDBY, Action::RunStandby(None)),
            (None, Some(ip(2)), false, STANDBY, Action::RunStandby(None)),
        ];
        for (target, address, fenced, local, expected) in cases {
            let action = plan("db-1", &desired(target, address, fenced), local);
            assert_eq!(
                action, expected,
                "target {target:?}, address {address:?}, fenced {fenced}, {local:?}"
            );
        }
    }
}
