//! Synchronous replication: the two modes PostgreSQL offers, the
//! `synchronous_standby_names` setting that declares them, the states
//! `pg_stat_replication` reports, and the rule that tells when the
//! standbys still reachable prove that one of them holds every commit the
//! primary acknowledged.

use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Synchronous replication method.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum SynchronousMode {
    /// Quorum commit: `ANY n (...)`.
    #[default]
    Any,
    /// Priority commit: `FIRST n (...)`.
    First,
}

/// Synchronous replication as declared: how many standbys confirm each
/// commit, and how they are chosen. `number` is at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synchronous {
    pub mode: SynchronousMode,
    pub number: u32,
}

/// A declaration PostgreSQL could not honour.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SynchronousError {
    #[error("must be at least 1 and lower than instances")]
    NumberOutOfRange,
}

impl Synchronous {
    /// `number` standbys out of the `instances - 1` a cluster has.
    pub fn new(
        mode: SynchronousMode,
        number: i64,
        instances: u32,
    ) -> Result<Self, SynchronousError> {
        let number = u32::try_from(number)
            .ok()
            .filter(|n| *n >= 1 && *n < instances)
            .ok_or(SynchronousError::NumberOutOfRange)?;
        Ok(Synchronous { mode, number })
    }

    /// True when a standby listed as synchronous by the primary is among
    /// `present` of the `members` it listed, and so holds every commit it
    /// acknowledged (the most advanced present standby is at least as far):
    /// - `FIRST n`: any one present member confirmed every commit;
    /// - `ANY n` of M: every commit is on n of the M, so on one of any
    ///   M - n + 1 of them.
    pub fn proves_every_commit(&self, members: usize, present: usize) -> bool {
        let number = self.number as usize;
        if number == 0 {
            return false;
        }
        match self.mode {
            SynchronousMode::Any => members >= number && present > members.saturating_sub(number),
            SynchronousMode::First => present > 0,
        }
    }

    /// `synchronous_standby_names` choosing among `candidates` (any
    /// standby when empty).
    pub fn standby_names(&self, candidates: &[String]) -> String {
        let method = match self.mode {
            SynchronousMode::Any => "ANY",
            SynchronousMode::First => "FIRST",
        };
        let names = if candidates.is_empty() {
            "*".to_owned()
        } else {
            candidates
                .iter()
                .map(|name| format!("\"{}\"", name.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!("{method} {} ({names})", self.number)
    }
}

/// The synchronous rule with the standbys it chooses among: what
/// `postgresql.conf` is rendered from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynchronousStandbys {
    pub rule: Synchronous,
    /// Candidate standbys' application names (instance names); any
    /// standby when empty.
    pub candidates: Vec<String>,
}

impl SynchronousStandbys {
    /// The `synchronous_standby_names` setting.
    pub fn setting(&self) -> String {
        self.rule.standby_names(&self.candidates)
    }
}

/// `pg_stat_replication.sync_state`: how the primary counts a standby.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncState {
    Async,
    /// Would become synchronous if a synchronous one left (`FIRST`).
    Potential,
    /// Confirms every commit (`FIRST`).
    Sync,
    /// One of the quorum a commit waits for (`ANY`).
    Quorum,
}

/// Text that is not a `sync_state`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a replication sync state")]
pub struct SyncStateError(String);

impl FromStr for SyncState {
    type Err = SyncStateError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "async" => Ok(SyncState::Async),
            "potential" => Ok(SyncState::Potential),
            "sync" => Ok(SyncState::Sync),
            "quorum" => Ok(SyncState::Quorum),
            other => Err(SyncStateError(other.to_owned())),
        }
    }
}

impl SyncState {
    /// Counted by the primary before it acknowledges a commit.
    pub fn confirms_commits(self) -> bool {
        matches!(self, SyncState::Sync | SyncState::Quorum)
    }
}

/// True when a reported `sync_state` text names a standby that commits
/// wait for (`sync` or `quorum`).
pub fn confirms_commits(sync_state: &str) -> bool {
    sync_state
        .parse::<SyncState>()
        .is_ok_and(SyncState::confirms_commits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_number_must_leave_a_primary() {
        let any = SynchronousMode::Any;
        assert_eq!(
            Synchronous::new(any, 2, 3),
            Ok(Synchronous {
                mode: any,
                number: 2
            })
        );
        for (number, instances) in [(0, 3), (3, 3), (-1, 3), (1, 1), (i64::MAX, 3)] {
            assert_eq!(
                Synchronous::new(any, number, instances),
                Err(SynchronousError::NumberOutOfRange),
                "{number} of {instances}"
            );
        }
    }

    #[test]
    fn a_quorum_proves_a_commit_only_when_enough_members_are_present() {
        let any = |number| Synchronous {
            mode: SynchronousMode::Any,
            number,
        };
        let first = Synchronous {
            mode: SynchronousMode::First,
            number: 1,
        };
        // (rule, members, present, proven)
        let cases = [
            (any(1), 2, 2, true),
            (any(1), 2, 1, false),
            (any(2), 2, 1, true),
            (any(2), 3, 2, true),
            (any(2), 3, 1, false),
            (any(2), 1, 1, false),
            (any(0), 2, 2, false),
            (first, 1, 1, true),
            (first, 1, 0, false),
        ];
        for (rule, members, present, proven) in cases {
            assert_eq!(
                rule.proves_every_commit(members, present),
                proven,
                "{rule:?} {present} of {members}"
            );
        }
    }

    #[test]
    fn sync_states_that_commits_wait_for() {
        assert!(confirms_commits("sync"));
        assert!(confirms_commits("quorum"));
        assert!(!confirms_commits("potential"));
        assert!(!confirms_commits("async"));
        assert!(!confirms_commits("SYNC"));
        assert!("nonsense".parse::<SyncState>().is_err());
    }
}
