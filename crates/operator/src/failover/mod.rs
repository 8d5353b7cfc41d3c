//! Choosing a new primary when the current one has failed (R25): pure, from
//! what the instance managers last reported to a decision.
//!
//! Rules:
//! - candidates are standbys whose PostgreSQL runs in recovery, are not
//!   fenced and are on no later timeline than the failed primary. Their WAL receivers
//!   have usually stopped already (the primary is gone), so "streaming
//!   now" cannot be asked of them;
//! - the best candidate has the highest received LSN, then the highest
//!   replayed LSN; a synchronous standby wins a tie;
//! - `dataDurability: required` promotes only when the declared
//!   synchronous replication proves that the best candidate holds every
//!   acknowledged commit. The declaration is the operator's own: the rule
//!   in force and the standbys `synchronous_standby_names` lists (every
//!   other instance), with the set it replaces while a change may still
//!   be in flight; what the primary last reported as `sync` or `quorum`
//!   proves nothing (a standby may have become synchronous since). For
//!   `ANY n` and `FIRST n` of M listed alike, each acknowledged commit was
//!   confirmed by n of the M, so any M - n + 1 of them include one that
//!   holds it: at least that many listed standbys must give their final
//!   received position in this very pass (a candidate, or a stopped
//!   witness below; one that does not answer is missing), and the best
//!   candidate must have received at least as much as each
//!   ([`tusk_postgres::synchronous::prove_every_commit`]); and
//!   the best candidate's received position covers the primary's last
//!   reported synchronous flush position (the position its synchronous
//!   standbys had flushed, so every commit acknowledged by then): a
//!   membership listed a while ago is not taken on trust alone.
//!
//!   A received LSN equal to the primary's last known position is no
//!   proof: that position is only as fresh as the last poll. Otherwise
//!   the failover is blocked, with the gap in bytes, until a person
//!   approves that very decision ([`approval`]);
//! - `preferred` promotes the best candidate and records the possible loss;
//! - never a candidate: the failed primary, a pod being deleted, a
//!   standby whose promotion this failover already abandoned
//!   ([`promotion`]: a chosen standby that does not serve in time is
//!   replaced by the next best), or one that reports it cannot reach the
//!   API server (it could not take the primary lease over);
//! - such a standby still vouches in the proof above when its WAL receiver
//!   has stopped: its received position is final (a standby streams only
//!   from the holder of a live lease), so a best candidate at least as far
//!   holds every commit it confirmed.
//!
//! This module decides; the reconcile loop applies the decision by setting
//! `status.targetPrimary`, and the instance managers promote and follow.

pub mod approval;
mod detect;
pub mod promotion;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tusk_api::instance::{InstancePhase, InstanceReport, InstanceRole};
use tusk_api::lsn::Lsn;
use tusk_api::v1alpha1::{BlockedFailover, DataDurability, RecoveryPoint};
use tusk_postgres::synchronous::{self, DeclaredSet, Synchronous};

pub use detect::{Unavailable, delay_left, primary_healthy, unavailable_since};

/// What the reconcile learned about the primary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailoverCheck {
    /// `None` when not judged (no serving primary yet).
    pub primary_available: Option<bool>,
    /// A failover the declared durability forbids, waiting for approval.
    pub blocked: Option<BlockedFailover>,
    /// A failover or switchover decided in this reconcile.
    pub record: Option<tusk_api::v1alpha1::FailoverRecord>,
    /// How long the failover delay, a promotion's time to complete, or
    /// the failed primary's lease (it may still be held) still runs.
    pub delay_left: Option<std::time::Duration>,
    /// A serving primary whose lease went quiet: how long until its
    /// manager has stopped it, had it lost the lease (it then says so, and
    /// is replaced without waiting for the lease to expire).
    pub fenced_in: Option<std::time::Duration>,
    /// The primary lease version the new primary takes over (see
    /// [`crate::primacy`]), with a failover decided in this reconcile.
    pub lease_takeover: Option<String>,
    /// A promotion that did not complete in time, with nothing to choose
    /// instead: why.
    pub stalled: Option<String>,
    /// The approval annotation was used or rejected: remove it.
    pub clear_approval: bool,
}

/// A reported WAL position as a byte offset.
fn lsn(text: &str) -> Option<u64> {
    text.parse::<Lsn>().ok().map(|lsn| lsn.0)
}

/// The synchronous replication the failed primary may have run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncSet {
    /// Each `synchronous_standby_names` it may have run when it failed:
    /// the one it was told last and, while a change is in flight, the one
    /// before (`None`: asynchronous). Built by the operator from what it
    /// declares, never from what the primary last reported.
    pub declared: Vec<Option<DeclaredSet>>,
    /// Standbys the primary last listed as `sync` or `quorum`: they win a
    /// tie between candidates, and prove nothing.
    pub reported: Vec<String>,
    /// The primary's last reported synchronous flush position: what its
    /// synchronous standbys had flushed, so every commit it acknowledged
    /// by then (the `n`-th highest flush position among `reported`).
    /// `None` when it reported none.
    pub flushed: Option<u64>,
}

impl SyncSet {
    /// The sets `declared`, with what the primary last reported of its
    /// standbys: those whose reported `sync_state` makes commits wait for
    /// them, and the flush position each commit acknowledged by then had
    /// reached under `synchronous` (the rule in force).
    pub fn new<'a>(
        declared: Vec<Option<DeclaredSet>>,
        synchronous: &Synchronous,
        standbys: impl IntoIterator<Item = ReportedStandby<'a>>,
    ) -> Self {
        let confirming: Vec<ReportedStandby<'a>> = standbys
            .into_iter()
            .filter(|s| s.sync_state.is_some_and(synchronous::confirms_commits))
            .collect();
        let mut flushes: Vec<u64> = confirming
            .iter()
            .filter_map(|s| s.flush_lsn.and_then(lsn))
            .collect();
        flushes.sort_unstable_by(|a, b| b.cmp(a));
        // Every acknowledged commit waited for `n` of them: the n-th
        // highest holds them all (with fewer reported, the lowest).
        let index = usize::try_from(synchronous.number.max(1)).unwrap_or(1);
        let flushed = flushes
            .get(index.min(flushes.len()).saturating_sub(1))
            .copied();
        SyncSet {
            declared,
            reported: confirming.iter().map(|s| s.name.to_owned()).collect(),
            flushed,
        }
    }
}

/// A standby as the primary last listed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportedStandby<'a> {
    pub name: &'a str,
    /// `sync`, `quorum`, `potential` or `async`.
    pub sync_state: Option<&'a str>,
    /// The WAL position the primary saw it flush.
    pub flush_lsn: Option<&'a str>,
}

/// What the operator last knew of the failed primary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LastKnown<'a> {
    pub primary: &'a str,
    /// Its last reported write position.
    pub lsn: Option<&'a str>,
    /// Its last reported timeline.
    pub timeline: Option<i64>,
    /// Synchronous replication, when declared.
    pub synchronous: Option<SyncSet>,
    /// Instances this failover must not choose: pods being deleted and
    /// standbys whose promotion it abandoned.
    pub excluded: Vec<String>,
}

/// One standby as last reported.
#[derive(Clone, Debug, PartialEq)]
struct Candidate<'a> {
    name: &'a str,
    received: u64,
    replayed: u64,
    synchronous: bool,
    report: &'a InstanceReport,
}

/// What to do about a failed primary.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Promote this instance. `lsn_gap_bytes` is what the failed primary
    /// may have had beyond it (0: nothing acknowledged is lost);
    /// `recovery_point` is where its history ends.
    Promote {
        instance: String,
        lsn_gap_bytes: u64,
        recovery_point: RecoveryPoint,
    },
    /// Promoting would violate `dataDurability: required`; wait for an
    /// approval. `best` is the candidate an approval would promote.
    Blocked { best: String, lsn_gap_bytes: u64 },
    /// No standby can take over (none running in recovery on the
    /// primary's timeline).
    NoCandidate,
}

fn is_candidate(last: &LastKnown<'_>, name: &str, report: &InstanceReport) -> bool {
    is_witness(last, name, report)
        && !last.excluded.iter().any(|e| e == name)
        && report.phase == InstancePhase::Running
        && !report.fenced
        // One cut off from the API server could not take the lease over.
        && report.api_server_reachable != Some(false)
}

/// A standby whose received position counts in the proof that the best
/// candidate holds every acknowledged commit: a standby of the failed
/// primary's history. Candidates are witnesses; so is any other standby
/// whose WAL receiver has stopped (it confirms nothing more: a standby
/// streams only from the holder of a live lease), whatever keeps it from
/// being chosen.
fn is_witness(last: &LastKnown<'_>, name: &str, report: &InstanceReport) -> bool {
    // A standby whose WAL receiver stopped reports the timeline of its last
    // restartpoint, which may be older than the one it replays: only a
    // later timeline than the primary's proves another history.
    let same_history = match (last.timeline, report.timeline) {
        (Some(primary), Some(standby)) => i64::from(standby) <= primary,
        _ => true,
    };
    name != last.primary && report.role == InstanceRole::Replica && same_history
}

/// The received position of a standby that is not a candidate but stopped
/// streaming: final, so it can vouch for the commits it confirmed.
fn stopped_witness(last: &LastKnown<'_>, name: &str, report: &InstanceReport) -> Option<u64> {
    (is_witness(last, name, report)
        && !is_candidate(last, name, report)
        && report.streaming == Some(false))
    .then(|| report.received_lsn.as_deref().and_then(lsn))
    .flatten()
}

/// True when the declared synchronous sets prove that the most advanced
/// of `candidates` (the first) holds every acknowledged commit
/// ([`synchronous::prove_every_commit`]), and it received at least what
/// the primary last reported its synchronous standbys had flushed. A
/// listed standby's position counts when it answered in this pass and
/// receives no more: a candidate (the failed primary streams to no one
/// whose view of its lease has lapsed) or a stopped witness (`others`).
/// A listed standby that did not answer is missing.
fn holds_every_acknowledged_commit(
    sync: Option<&SyncSet>,
    candidates: &[Candidate<'_>],
    others: &[(&str, u64)],
) -> bool {
    let (Some(sync), Some(best)) = (sync, candidates.first()) else {
        return false;
    };
    let final_position = |name: &str| {
        candidates
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.received)
            .or_else(|| others.iter().find(|(n, _)| *n == name).map(|(_, p)| *p))
    };
    let proof = synchronous::prove_every_commit(&sync.declared, final_position, best.received);
    if let Err(why) = &proof {
        tracing::debug!(candidate = best.name, %why, "no proof that nothing acknowledged is lost");
    }
    proof.is_ok()
        && others
            .iter()
            .all(|(_, received)| best.received >= *received)
        && sync.flushed.is_none_or(|flushed| best.received >= flushed)
}

/// Decides which standby replaces the failed primary. `approved` is a
/// person's approval of possible data loss.
pub fn decide(
    last: &LastKnown<'_>,
    reports: &[(&str, &InstanceReport)],
    durability: DataDurability,
    approved: bool,
) -> Decision {
    let members: &[String] = last
        .synchronous
        .as_ref()
        .map_or(&[], |s| s.reported.as_slice());
    let mut candidates: Vec<Candidate<'_>> = reports
        .iter()
        .filter(|(name, report)| is_candidate(last, name, report))
        .filter_map(|(name, report)| {
            Some(Candidate {
                name,
                received: report.received_lsn.as_deref().and_then(lsn)?,
                replayed: report.replayed_lsn.as_deref().and_then(lsn).unwrap_or(0),
                synchronous: members.iter().any(|s| s == name),
                report,
            })
        })
        .collect();
    candidates.sort_by(|a, b| {
        (b.received, b.replayed, b.synchronous)
            .cmp(&(a.received, a.replayed, a.synchronous))
            .then_with(|| a.name.cmp(b.name))
    });
    let Some(best) = candidates.first() else {
        return Decision::NoCandidate;
    };
    let gap = last
        .lsn
        .and_then(lsn)
        .map_or(0, |p| p.saturating_sub(best.received));
    let others: Vec<(&str, u64)> = reports
        .iter()
        .filter_map(|(name, report)| Some((*name, stopped_witness(last, name, report)?)))
        .collect();
    let safe = holds_every_acknowledged_commit(last.synchronous.as_ref(), &candidates, &others);
    if durability == DataDurability::Required && !safe && !approved {
        return Decision::Blocked {
            best: best.name.to_owned(),
            lsn_gap_bytes: gap,
        };
    }
    Decision::Promote {
        instance: best.name.to_owned(),
        lsn_gap_bytes: if safe { 0 } else { gap },
        recovery_point: RecoveryPoint {
            lsn: Lsn(best.received).to_string(),
            time: best
                .report
                .replayed_commit_time
                .as_deref()
                .and_then(|t| t.parse().ok())
                .map(Time),
        },
    }
}

#[cfg(test)]
mod tests;
