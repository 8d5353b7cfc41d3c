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
//! - `dataDurability: required` promotes only when the synchronous
//!   replication the primary last reported proves that the best candidate
//!   holds every acknowledged commit:
//!   - `FIRST n`: a standby listed as `sync` is among the candidates (it
//!     confirmed every commit, and the best is at least as far);
//!   - `ANY n` of M quorum standbys: at least M - n + 1 of them are
//!     candidates (every commit is on n of the M, so on one of these, and
//!     the best is at least as far as each).
//!
//!   A received LSN equal to the primary's last known position is no
//!   proof: that position is only as fresh as the last poll. Otherwise
//!   the failover is blocked, with the gap in bytes, until a person
//!   approves;
//! - `preferred` promotes the best candidate and records the possible loss.
//!
//! This module decides; the reconcile loop applies the decision by setting
//! `status.targetPrimary`, and the instance managers promote and follow.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tusk_api::instance::{InstancePhase, InstanceReport, InstanceRole};
use tusk_api::lsn::Lsn;
use tusk_api::v1alpha1::{DataDurability, RecoveryPoint};
use tusk_postgres::synchronous::{self, Synchronous, SynchronousMode};

/// Condition type recording whether the primary serves; its transition
/// time is when it stopped.
pub const PRIMARY_AVAILABLE: &str = "PrimaryAvailable";

/// What the reconcile learned about the primary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailoverCheck {
    /// `None` when not judged (no serving primary yet).
    pub primary_available: Option<bool>,
    /// A failover the declared durability forbids: best candidate and gap.
    pub blocked: Option<(String, u64)>,
    /// A failover or switchover decided in this reconcile.
    pub record: Option<tusk_api::v1alpha1::FailoverRecord>,
    /// How long the failover delay still runs, while it runs (or how long
    /// the failed primary's lease may still be held).
    pub delay_left: Option<std::time::Duration>,
    /// The primary lease version the new primary takes over (see
    /// [`crate::primacy`]), with a failover decided in this reconcile.
    pub lease_takeover: Option<String>,
}

/// The primary serves: its pod is ready and its manager reports it as the
/// primary (a manager that does not answer counts as unavailable).
pub fn primary_healthy(pod_ready: bool, report: Option<&InstanceReport>) -> bool {
    pod_ready && report.is_some_and(|r| r.role == InstanceRole::Primary && r.ready)
}

/// Since when the primary counts as unavailable: the earlier of the
/// operator's first observation (the PrimaryAvailable condition turning
/// False) and the kubelet's (the pod's Ready condition turning False), so
/// `delaySeconds` runs from the first evidence of the failure and not from
/// whenever a reconcile happened to notice it. Evidence from before
/// `primary_since` (when a failover or switchover made this instance the
/// primary) is about its time as a standby, whose pod turns unready when
/// its primary fails, and does not count. Never later than `now`.
pub fn unavailable_since(
    observed: Option<Timestamp>,
    pod_not_ready: Option<Timestamp>,
    primary_since: Option<Timestamp>,
    now: Timestamp,
) -> Timestamp {
    let first = observed
        .into_iter()
        .chain(pod_not_ready)
        .fold(now, std::cmp::min);
    primary_since.map_or(first, |since| first.max(since).min(now))
}

/// How much longer to wait before a failover, or `None` once the primary
/// has been unavailable for `delay_seconds`. Kubernetes records times in
/// whole seconds, rounded down, so `since` may be up to a second early:
/// one more second is waited, and a primary is never replaced sooner than
/// its delay after the first evidence of its failure.
pub fn delay_left(
    since: Timestamp,
    now: Timestamp,
    delay_seconds: i32,
) -> Option<std::time::Duration> {
    let needed = k8s_openapi::jiff::SignedDuration::from_secs(i64::from(delay_seconds.max(0)) + 1);
    let left = needed - now.duration_since(since);
    left.is_positive()
        .then(|| std::time::Duration::try_from(left).ok())
        .flatten()
}

/// A reported WAL position as a byte offset.
fn lsn(text: &str) -> Option<u64> {
    text.parse::<Lsn>().ok().map(|lsn| lsn.0)
}

/// The synchronous replication the failed primary last reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncSet {
    /// `ANY n` (quorum) when true, `FIRST n` (priority) when false.
    pub quorum: bool,
    /// Standbys that confirm each commit (`n`).
    pub number: u32,
    /// Standbys the primary listed as `sync` or `quorum`.
    pub members: Vec<String>,
}

impl SyncSet {
    /// The declared rule `synchronous` with the members the primary last
    /// listed: the instances whose reported `sync_state` makes commits wait
    /// for them.
    pub fn reported<'a>(
        synchronous: &Synchronous,
        sync_states: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Self {
        SyncSet {
            quorum: synchronous.mode == SynchronousMode::Any,
            number: synchronous.number,
            members: sync_states
                .into_iter()
                .filter(|(_, state)| state.is_some_and(synchronous::confirms_commits))
                .map(|(name, _)| name.to_owned())
                .collect(),
        }
    }

    /// The synchronous rule this set was declared with.
    fn rule(&self) -> Synchronous {
        let mode = if self.quorum {
            SynchronousMode::Any
        } else {
            SynchronousMode::First
        };
        Synchronous {
            mode,
            number: self.number,
        }
    }
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
    // A standby whose WAL receiver stopped reports the timeline of its last
    // restartpoint, which may be older than the one it replays: only a
    // later timeline than the primary's proves another history.
    let same_history = match (last.timeline, report.timeline) {
        (Some(primary), Some(standby)) => i64::from(standby) <= primary,
        _ => true,
    };
    name != last.primary
        && report.role == InstanceRole::Replica
        && report.phase == InstancePhase::Running
        && !report.fenced
        && same_history
}

/// True when the synchronous set proves that the most advanced of
/// `candidates` holds every acknowledged commit.
fn holds_every_acknowledged_commit(sync: Option<&SyncSet>, candidates: &[Candidate<'_>]) -> bool {
    let Some(sync) = sync else {
        return false;
    };
    let present = candidates.iter().filter(|c| c.synchronous).count();
    sync.rule().proves_every_commit(sync.members.len(), present)
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
        .map_or(&[], |s| s.members.as_slice());
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
    let safe = holds_every_acknowledged_commit(last.synchronous.as_ref(), &candidates);
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
mod tests {
    use super::*;

    #[test]
    fn the_delay_runs_a_second_longer_than_whole_second_timestamps_could_hide() {
        let at = |s: &str| s.parse::<Timestamp>().expect("timestamp");
        let since = at("2026-12-02T10:00:03Z");
        let left = |now: &str| delay_left(since, at(now), 5).map(|d| d.as_millis());
        assert_eq!(left("2026-12-02T10:00:03Z"), Some(6000));
        assert_eq!(left("2026-12-02T10:00:08.250Z"), Some(750));
        assert_eq!(left("2026-12-02T10:00:09Z"), None);
        assert_eq!(left("2026-12-02T10:00:30Z"), None);
        // No delay: only the rounding second.
        assert_eq!(
            delay_left(since, since, 0).map(|d| d.as_millis()),
            Some(1000)
        );
    }

    #[test]
    fn unavailability_counts_from_the_first_evidence() {
        let at = |s: &str| s.parse::<Timestamp>().expect("timestamp");
        let now = at("2026-12-02T10:00:10Z");
        let kubelet = at("2026-12-02T10:00:03Z");
        let operator = at("2026-12-02T10:00:06Z");
        // The kubelet saw it first: the delay runs from its verdict.
        assert_eq!(
            unavailable_since(Some(operator), Some(kubelet), None, now),
            kubelet
        );
        assert_eq!(
            unavailable_since(Some(kubelet), Some(operator), None, now),
            kubelet
        );
        // A ready pod whose manager reports it unhealthy: the operator's view.
        assert_eq!(unavailable_since(Some(operator), None, None, now), operator);
        // First noticed now.
        assert_eq!(unavailable_since(None, None, None, now), now);
        // A clock ahead of ours never makes the wait negative.
        let ahead = at("2026-12-02T10:00:20Z");
        assert_eq!(unavailable_since(None, Some(ahead), None, now), now);
    }

    #[test]
    fn a_new_primary_is_not_judged_by_its_time_as_a_standby() {
        let at = |s: &str| s.parse::<Timestamp>().expect("timestamp");
        let now = at("2026-12-02T10:00:10Z");
        // Its pod turned unready when the former primary died, while it
        // was a standby; it was promoted at :09 and is not ready yet.
        let unready_as_standby = at("2026-12-02T10:00:04Z");
        let promoted = at("2026-12-02T10:00:09Z");
        let since = unavailable_since(None, Some(unready_as_standby), Some(promoted), now);
        assert_eq!(since, promoted);
        assert!(
            delay_left(since, now, 3).is_some(),
            "a fresh primary gets its whole delay"
        );
        // Evidence from after the promotion counts as always.
        let after = at("2026-12-02T10:00:09.5Z");
        assert_eq!(
            unavailable_since(Some(after), None, Some(promoted), now),
            after
        );
        // A promotion recorded ahead of our clock never makes the wait negative.
        let ahead = at("2026-12-02T10:00:20Z");
        assert_eq!(unavailable_since(None, None, Some(ahead), now), now);
    }

    fn standby(name: &str, received: &str, replayed: &str) -> InstanceReport {
        InstanceReport {
            name: name.into(),
            role: InstanceRole::Replica,
            phase: InstancePhase::Running,
            // The primary is gone: the WAL receiver stopped, so not ready.
            ready: false,
            fenced: false,
            target_primary: Some("db-1".into()),
            postgres_version: None,
            system_identifier: None,
            timeline: Some(1),
            current_lsn: None,
            received_lsn: Some(received.into()),
            replayed_lsn: Some(replayed.into()),
            lag_bytes: None,
            lag_seconds: None,
            replayed_commit_time: None,
            streaming: Some(false),
            upstream: None,
            pending_restart: vec![],
            standbys: vec![],
            crash_count: 0,
            last_error: None,
            desired_state_errors: vec![],
        }
    }

    fn sync(quorum: bool, number: u32, members: &[&str]) -> Option<SyncSet> {
        Some(SyncSet {
            quorum,
            number,
            members: members.iter().map(|m| (*m).to_owned()).collect(),
        })
    }

    fn decide_with(
        reports: &[InstanceReport],
        primary_lsn: &str,
        synchronous: Option<SyncSet>,
        durability: DataDurability,
        approved: bool,
    ) -> Decision {
        let pairs: Vec<(&str, &InstanceReport)> =
            reports.iter().map(|r| (r.name.as_str(), r)).collect();
        let last = LastKnown {
            primary: "db-1",
            lsn: Some(primary_lsn),
            timeline: Some(1),
            synchronous,
        };
        decide(&last, &pairs, durability, approved)
    }

    fn promoted(decision: &Decision) -> Option<(&str, u64)> {
        match decision {
            Decision::Promote {
                instance,
                lsn_gap_bytes,
                ..
            } => Some((instance.as_str(), *lsn_gap_bytes)),
            _ => None,
        }
    }

    #[test]
    fn the_most_advanced_standby_is_chosen() {
        let reports = [
            standby("db-2", "0/3000000", "0/3000000"),
            standby("db-3", "0/3000100", "0/3000000"),
        ];
        let decision = decide_with(
            &reports,
            "0/3000100",
            sync(true, 1, &["db-2", "db-3"]),
            DataDurability::Required,
            false,
        );
        assert_eq!(promoted(&decision), Some(("db-3", 0)));
    }

    #[test]
    fn replayed_position_then_synchronous_state_break_ties() {
        let reports = [
            standby("db-2", "0/3000100", "0/3000000"),
            standby("db-3", "0/3000100", "0/3000080"),
        ];
        let decision = decide_with(
            &reports,
            "0/3000100",
            None,
            DataDurability::Preferred,
            false,
        );
        assert_eq!(promoted(&decision), Some(("db-3", 0)));
        let equal = [
            standby("db-2", "0/3000100", "0/3000100"),
            standby("db-3", "0/3000100", "0/3000100"),
        ];
        let decision = decide_with(
            &equal,
            "0/3000100",
            sync(false, 1, &["db-3"]),
            DataDurability::Required,
            false,
        );
        assert_eq!(promoted(&decision), Some(("db-3", 0)));
    }

    #[test]
    fn required_durability_blocks_an_asynchronous_standby() {
        let behind = [standby("db-2", "0/3000000", "0/3000000")];
        let decision = decide_with(&behind, "0/3000400", None, DataDurability::Required, false);
        assert_eq!(
            decision,
            Decision::Blocked {
                best: "db-2".into(),
                lsn_gap_bytes: 0x400
            }
        );
        // Even level with the last known position: that position may be
        // older than the primary's last acknowledged commit.
        let level = [standby("db-2", "0/3000400", "0/3000400")];
        let decision = decide_with(&level, "0/3000400", None, DataDurability::Required, false);
        assert!(matches!(decision, Decision::Blocked { .. }), "{decision:?}");
    }

    #[test]
    fn approval_unblocks_and_preferred_promotes_with_the_gap_recorded() {
        let reports = [standby("db-2", "0/3000000", "0/3000000")];
        let approved = decide_with(&reports, "0/3000400", None, DataDurability::Required, true);
        assert_eq!(promoted(&approved), Some(("db-2", 0x400)));
        let preferred = decide_with(
            &reports,
            "0/3000400",
            None,
            DataDurability::Preferred,
            false,
        );
        assert_eq!(promoted(&preferred), Some(("db-2", 0x400)));
    }

    #[test]
    fn a_priority_synchronous_standby_holds_every_acknowledged_commit() {
        // The primary's last known position may include unacknowledged WAL
        // that a synchronous standby never received: nothing acknowledged
        // is lost. A more advanced potential standby is promoted: it holds
        // everything the sync one does.
        let reports = [
            standby("db-2", "0/3000000", "0/3000000"),
            standby("db-3", "0/3000200", "0/3000200"),
        ];
        let decision = decide_with(
            &reports,
            "0/3000400",
            sync(false, 1, &["db-2"]),
            DataDurability::Required,
            false,
        );
        assert_eq!(promoted(&decision), Some(("db-3", 0)));
    }

    #[test]
    fn a_quorum_proves_nothing_unless_enough_of_its_members_answer() {
        // ANY 1 of db-2, db-3: each commit is on one of them, not both.
        let both = [
            standby("db-2", "0/3000000", "0/3000000"),
            standby("db-3", "0/3000100", "0/3000100"),
        ];
        let members = sync(true, 1, &["db-2", "db-3"]);
        let decision = decide_with(
            &both,
            "0/3000400",
            members.clone(),
            DataDurability::Required,
            false,
        );
        assert_eq!(promoted(&decision), Some(("db-3", 0)));
        let one = [standby("db-2", "0/3000000", "0/3000000")];
        let decision = decide_with(&one, "0/3000400", members, DataDurability::Required, false);
        assert_eq!(
            decision,
            Decision::Blocked {
                best: "db-2".into(),
                lsn_gap_bytes: 0x400
            }
        );
        // ANY 2 of three: any two of them suffice.
        let two_of_three = [
            standby("db-2", "0/3000000", "0/3000000"),
            standby("db-4", "0/3000000", "0/3000000"),
        ];
        let decision = decide_with(
            &two_of_three,
            "0/3000400",
            sync(true, 2, &["db-2", "db-3", "db-4"]),
            DataDurability::Required,
            false,
        );
        assert_eq!(promoted(&decision), Some(("db-2", 0)));
    }

    #[test]
    fn stopped_fenced_or_diverged_standbys_are_not_candidates() {
        let mut stopped = standby("db-2", "0/3000000", "0/3000000");
        stopped.role = InstanceRole::Stopped;
        let mut fenced = standby("db-3", "0/3000000", "0/3000000");
        fenced.fenced = true;
        let mut other_timeline = standby("db-4", "0/3000000", "0/3000000");
        other_timeline.timeline = Some(3);
        let mut primary = standby("db-5", "0/3000000", "0/3000000");
        primary.role = InstanceRole::Primary;
        let mut rejoining = standby("db-6", "0/3000000", "0/3000000");
        rejoining.phase = InstancePhase::Rejoining;
        let decision = decide_with(
            &[stopped, fenced, other_timeline, primary, rejoining],
            "0/3000000",
            None,
            DataDurability::Preferred,
            false,
        );
        assert_eq!(decision, Decision::NoCandidate);
    }

    #[test]
    fn the_recovery_point_is_where_the_promoted_standby_stopped_receiving() {
        let mut report = standby("db-2", "0/3000100", "0/3000100");
        report.replayed_commit_time = Some("2026-12-02T10:00:00.123456Z".into());
        let decision = decide_with(
            &[report],
            "0/3000100",
            None,
            DataDurability::Preferred,
            false,
        );
        let Decision::Promote { recovery_point, .. } = decision else {
            panic!("promotes: {decision:?}");
        };
        assert_eq!(recovery_point.lsn, "0/3000100");
        let time = recovery_point.time.expect("a commit time");
        assert_eq!(time.0.to_string(), "2026-12-02T10:00:00.123456Z");
    }

    #[test]
    fn lsns_compare_numerically_across_the_slash() {
        assert!(lsn("1/0").expect("valid") > lsn("0/FFFFFFFF").expect("valid"));
        assert_eq!(lsn("0/10"), Some(16));
        assert_eq!(lsn("garbage"), None);
    }
}
