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

    /// True when `present` of the `members` listed under this rule include
    /// one that confirmed every commit the primary acknowledged. For
    /// `ANY n` and `FIRST n` alike a commit is acknowledged once `n` of
    /// the listed standbys confirmed it (`FIRST` only says which `n`, and
    /// that changes as standbys come and go), so any `members - n + 1` of
    /// them include one of those `n`.
    pub fn proves_every_commit(&self, members: usize, present: usize) -> bool {
        let number = self.number as usize;
        number > 0 && members >= number && present > members - number
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

/// A `synchronous_standby_names` a primary may have run: its rule and the
/// standbys it listed (their application names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredSet {
    pub rule: Synchronous,
    pub members: Vec<String>,
}

/// Why the standbys at hand do not prove that a candidate holds every
/// commit the primary acknowledged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unproven {
    /// The primary may have run without synchronous standbys.
    #[error("the primary may have acknowledged commits without a synchronous standby")]
    Asynchronous,
    /// Too few listed standbys gave their final position.
    #[error(
        "{present} of the {members} standbys listed with {number} to confirm each commit answered; {needed} are needed"
    )]
    TooFewListed {
        members: usize,
        number: u32,
        present: usize,
        needed: usize,
    },
    /// A listed standby received more than the candidate: it may hold
    /// commits the candidate lacks.
    #[error("{standby} received {ahead} bytes more than the candidate")]
    Behind { standby: String, ahead: u64 },
}

/// Proves that a standby that received up to `candidate` holds every
/// commit the primary acknowledged, whichever of `sets` it ran (the set
/// in force and, while a change is in flight, the one it replaces; `None`
/// for asynchronous replication). `final_position` gives a listed
/// standby's received position when it is final (the standby answered now
/// and receives no more), `None` when it is missing.
///
/// Under each set of `n` of `M` listed standbys, `M - n + 1` with a final
/// position include one that confirmed every acknowledged commit
/// ([`Synchronous::proves_every_commit`]); the candidate holds them all
/// when it received at least as much as each of them.
pub fn prove_every_commit(
    sets: &[Option<DeclaredSet>],
    final_position: impl Fn(&str) -> Option<u64>,
    candidate: u64,
) -> Result<(), Unproven> {
    if sets.is_empty() {
        return Err(Unproven::Asynchronous);
    }
    for set in sets {
        let Some(set) = set else {
            return Err(Unproven::Asynchronous);
        };
        let mut members: Vec<&str> = set.members.iter().map(String::as_str).collect();
        members.sort_unstable();
        members.dedup();
        let known: Vec<(&str, u64)> = members
            .iter()
            .filter_map(|m| Some((*m, final_position(m)?)))
            .collect();
        if !set.rule.proves_every_commit(members.len(), known.len()) {
            let number = set.rule.number;
            return Err(Unproven::TooFewListed {
                members: members.len(),
                number,
                present: known.len(),
                needed: match number as usize {
                    n if n == 0 || n > members.len() => members.len() + 1,
                    n => members.len() - n + 1,
                },
            });
        }
        if let Some((standby, position)) = known.iter().find(|(_, p)| *p > candidate) {
            return Err(Unproven::Behind {
                standby: (*standby).to_owned(),
                ahead: position - candidate,
            });
        }
    }
    Ok(())
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
            // FIRST 1 of 2: the one listed first may have changed since
            // any report, so one of the two proves nothing.
            (first, 2, 1, false),
            (first, 2, 2, true),
        ];
        for (rule, members, present, proven) in cases {
            assert_eq!(
                rule.proves_every_commit(members, present),
                proven,
                "{rule:?} {present} of {members}"
            );
        }
    }

    fn declared(mode: SynchronousMode, number: u32, members: &[&str]) -> Option<DeclaredSet> {
        Some(DeclaredSet {
            rule: Synchronous { mode, number },
            members: members.iter().map(|m| (*m).to_owned()).collect(),
        })
    }

    #[test]
    fn a_candidate_is_proven_by_enough_of_every_set_the_primary_may_have_run() {
        use SynchronousMode::{Any, First};
        let three = ["db-2", "db-3", "db-4"];
        let too_few = |members, number, present, needed| {
            Err(Unproven::TooFewListed {
                members,
                number,
                present,
                needed,
            })
        };
        // (sets, standbys with a final position, candidate, outcome)
        type Case = (
            Vec<Option<DeclaredSet>>,
            &'static [(&'static str, u64)],
            u64,
            Result<(), Unproven>,
        );
        let cases: Vec<Case> = vec![
            // ANY 1 of 3: every one must answer.
            (
                vec![declared(Any, 1, &three)],
                &[("db-2", 9), ("db-3", 7), ("db-4", 5)],
                9,
                Ok(()),
            ),
            (
                vec![declared(Any, 1, &three)],
                &[("db-2", 9), ("db-3", 7)],
                9,
                too_few(3, 1, 2, 3),
            ),
            // ANY 2 of 3: any two.
            (
                vec![declared(Any, 2, &three)],
                &[("db-3", 7), ("db-4", 5)],
                7,
                Ok(()),
            ),
            (
                vec![declared(Any, 2, &three)],
                &[("db-3", 7)],
                7,
                too_few(3, 2, 1, 2),
            ),
            // FIRST n counts the same: n of the M confirmed each commit.
            (
                vec![declared(First, 1, &["db-2", "db-3"])],
                &[("db-2", 9)],
                9,
                too_few(2, 1, 1, 2),
            ),
            (
                vec![declared(First, 1, &["db-2", "db-3"])],
                &[("db-2", 9), ("db-3", 4)],
                9,
                Ok(()),
            ),
            (
                vec![declared(First, 2, &three)],
                &[("db-2", 9), ("db-4", 9)],
                9,
                Ok(()),
            ),
            (
                vec![declared(First, 2, &three)],
                &[("db-4", 9)],
                9,
                too_few(3, 2, 1, 2),
            ),
            // Enough answered, but one received more than the candidate.
            (
                vec![declared(Any, 1, &["db-2", "db-3"])],
                &[("db-2", 9), ("db-3", 12)],
                9,
                Err(Unproven::Behind {
                    standby: "db-3".into(),
                    ahead: 3,
                }),
            ),
            // A member added just before the loss and lost with the
            // primary: the primary listed it, so it is missing.
            (
                vec![declared(Any, 1, &["db-2", "db-3", "db-5"])],
                &[("db-2", 9), ("db-3", 9)],
                9,
                too_few(3, 1, 2, 3),
            ),
            // A change in flight (db-5 added): proven only under both.
            (
                vec![
                    declared(Any, 1, &["db-2", "db-3"]),
                    declared(Any, 1, &["db-2", "db-3", "db-5"]),
                ],
                &[("db-2", 9), ("db-3", 9)],
                9,
                too_few(3, 1, 2, 3),
            ),
            (
                vec![
                    declared(Any, 1, &["db-2", "db-3"]),
                    declared(Any, 1, &["db-2", "db-3", "db-5"]),
                ],
                &[("db-2", 9), ("db-3", 9), ("db-5", 2)],
                9,
                Ok(()),
            ),
            // A number lowered in flight: the lower number needs more.
            (
                vec![declared(Any, 2, &three), declared(Any, 1, &three)],
                &[("db-2", 9), ("db-3", 9)],
                9,
                too_few(3, 1, 2, 3),
            ),
            // Replication turned on or off in flight, or never declared.
            (
                vec![declared(Any, 1, &["db-2"]), None],
                &[("db-2", 9)],
                9,
                Err(Unproven::Asynchronous),
            ),
            (vec![], &[("db-2", 9)], 9, Err(Unproven::Asynchronous)),
            // A name listed twice is one standby; more required than listed
            // is never proven.
            (
                vec![declared(Any, 1, &["db-2", "db-2", "db-3"])],
                &[("db-2", 9)],
                9,
                too_few(2, 1, 1, 2),
            ),
            (
                vec![declared(Any, 3, &["db-2", "db-3"])],
                &[("db-2", 9), ("db-3", 9)],
                9,
                too_few(2, 3, 2, 3),
            ),
        ];
        for (sets, known, candidate, outcome) in cases {
            let position = |name: &str| known.iter().find(|(n, _)| *n == name).map(|(_, p)| *p);
            assert_eq!(
                prove_every_commit(&sets, position, candidate),
                outcome,
                "{sets:?} {known:?}"
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
