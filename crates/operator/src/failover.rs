//! Choosing a new primary when the current one has failed (R25): pure, from
//! what the instance managers last reported to a decision.
//!
//! Rules:
//! - only standbys that are ready and were streaming from the failed
//!   primary are candidates;
//! - the best candidate has the highest received LSN, then the highest
//!   replayed LSN; a synchronous standby wins a tie;
//! - `dataDurability: required` promotes only a candidate that holds every
//!   commit the primary acknowledged: a synchronous standby, or one whose
//!   received LSN reaches the primary's last known position. Otherwise the
//!   failover is blocked, with the gap in bytes, until a person approves;
//! - `preferred` promotes the best candidate and records the possible loss.
//!
//! This module decides; the reconcile loop applies the decision by setting
//! `status.targetPrimary`, and the instance managers promote and follow.

use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::lsn::Lsn;
use tusk_api::v1alpha1::DataDurability;

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
    /// A failover decided in this reconcile.
    pub record: Option<tusk_api::v1alpha1::FailoverRecord>,
}

/// The primary serves: its pod is ready and its manager reports it as the
/// primary (a manager that does not answer counts as unavailable).
pub fn primary_healthy(pod_ready: bool, report: Option<&InstanceReport>) -> bool {
    pod_ready && report.is_some_and(|r| r.role == InstanceRole::Primary && r.ready)
}

/// A reported WAL position as a byte offset.
fn lsn(text: &str) -> Option<u64> {
    text.parse::<Lsn>().ok().map(|lsn| lsn.0)
}

/// One standby as last reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate<'a> {
    pub name: &'a str,
    pub received: u64,
    pub replayed: u64,
    /// The failed primary listed it as `sync` or `quorum`.
    pub synchronous: bool,
}

/// What to do about a failed primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Promote this instance. `lsn_gap_bytes` is what the failed primary
    /// may have had beyond it (0: nothing acknowledged is lost).
    Promote {
        instance: String,
        lsn_gap_bytes: u64,
    },
    /// Promoting would violate `dataDurability: required`; wait for an
    /// approval. `best` is the candidate an approval would promote.
    Blocked { best: String, lsn_gap_bytes: u64 },
    /// No standby can take over (none ready and streaming).
    NoCandidate,
}

/// Decides which standby replaces `failed_primary`.
///
/// `last_primary_lsn` is the primary's last known write position and
/// `synchronous` the standbys it last reported as synchronous. `approved`
/// is a person's approval of possible data loss.
pub fn decide(
    failed_primary: &str,
    last_primary_lsn: Option<&str>,
    synchronous: &[String],
    reports: &[(&str, &InstanceReport)],
    durability: DataDurability,
    approved: bool,
) -> Decision {
    let primary_ip_upstream = |report: &InstanceReport| report.upstream.is_some();
    let mut candidates: Vec<Candidate<'_>> = reports
        .iter()
        .filter(|(name, report)| {
            *name != failed_primary
                && report.role == InstanceRole::Replica
                && report.ready
                && !report.fenced
                && primary_ip_upstream(report)
        })
        .filter_map(|(name, report)| {
            Some(Candidate {
                name,
                received: report.received_lsn.as_deref().and_then(lsn)?,
                replayed: report.replayed_lsn.as_deref().and_then(lsn).unwrap_or(0),
                synchronous: synchronous.iter().any(|s| s == name),
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
    let primary_lsn = last_primary_lsn.and_then(lsn);
    let gap = primary_lsn.map_or(0, |p| p.saturating_sub(best.received));
    let holds_everything = best.synchronous || (primary_lsn.is_some() && gap == 0);
    match durability {
        DataDurability::Required if !holds_everything && !approved => Decision::Blocked {
            best: best.name.to_owned(),
            lsn_gap_bytes: gap,
        },
        _ => Decision::Promote {
            instance: best.name.to_owned(),
            lsn_gap_bytes: if best.synchronous { 0 } else { gap },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tusk_api::instance::InstancePhase;

    fn standby(name: &str, received: &str, replayed: &str) -> InstanceReport {
        InstanceReport {
            name: name.into(),
            role: InstanceRole::Replica,
            phase: InstancePhase::Running,
            ready: true,
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
            streaming: Some(false),
            upstream: Some("127.2.0.1".into()),
            pending_restart: vec![],
            standbys: vec![],
            crash_count: 0,
            last_error: None,
        }
    }

    fn decide_with(
        reports: &[InstanceReport],
        primary_lsn: &str,
        sync: &[&str],
        durability: DataDurability,
        approved: bool,
    ) -> Decision {
        let pairs: Vec<(&str, &InstanceReport)> =
            reports.iter().map(|r| (r.name.as_str(), r)).collect();
        let sync: Vec<String> = sync.iter().map(|s| (*s).to_owned()).collect();
        decide(
            "db-1",
            Some(primary_lsn),
            &sync,
            &pairs,
            durability,
            approved,
        )
    }

    #[test]
    fn the_most_advanced_standby_is_chosen() {
        let reports = [
            standby("db-2", "0/3000000", "0/3000000"),
            standby("db-3", "0/3000100", "0/3000000"),
        ];
        let decision = decide_with(&reports, "0/3000100", &[], DataDurability::Required, false);
        assert_eq!(
            decision,
            Decision::Promote {
                instance: "db-3".into(),
                lsn_gap_bytes: 0
            }
        );
    }

    #[test]
    fn replayed_position_then_synchronous_state_break_ties() {
        let reports = [
            standby("db-2", "0/3000100", "0/3000000"),
            standby("db-3", "0/3000100", "0/3000080"),
        ];
        let decision = decide_with(&reports, "0/3000100", &[], DataDurability::Required, false);
        assert_eq!(
            decision,
            Decision::Promote {
                instance: "db-3".into(),
                lsn_gap_bytes: 0
            }
        );
        let equal = [
            standby("db-2", "0/3000100", "0/3000100"),
            standby("db-3", "0/3000100", "0/3000100"),
        ];
        let decision = decide_with(
            &equal,
            "0/3000100",
            &["db-3"],
            DataDurability::Required,
            false,
        );
        assert_eq!(
            decision,
            Decision::Promote {
                instance: "db-3".into(),
                lsn_gap_bytes: 0
            }
        );
    }

    #[test]
    fn required_durability_blocks_a_lagging_asynchronous_standby() {
        let reports = [standby("db-2", "0/3000000", "0/3000000")];
        let decision = decide_with(&reports, "0/3000400", &[], DataDurability::Required, false);
        assert_eq!(
            decision,
            Decision::Blocked {
                best: "db-2".into(),
                lsn_gap_bytes: 0x400
            }
        );
    }

    #[test]
    fn approval_unblocks_and_preferred_promotes_with_the_gap_recorded() {
        let reports = [standby("db-2", "0/3000000", "0/3000000")];
        let approved = decide_with(&reports, "0/3000400", &[], DataDurability::Required, true);
        assert_eq!(
            approved,
            Decision::Promote {
                instance: "db-2".into(),
                lsn_gap_bytes: 0x400
            }
        );
        let preferred = decide_with(&reports, "0/3000400", &[], DataDurability::Preferred, false);
        assert_eq!(
            preferred,
            Decision::Promote {
                instance: "db-2".into(),
                lsn_gap_bytes: 0x400
            }
        );
    }

    #[test]
    fn a_synchronous_standby_holds_every_acknowledged_commit() {
        // The primary's last known position may include unacknowledged WAL
        // that a synchronous standby never received: nothing acknowledged is lost.
        let reports = [standby("db-2", "0/3000000", "0/3000000")];
        let decision = decide_with(
            &reports,
            "0/3000400",
            &["db-2"],
            DataDurability::Required,
            false,
        );
        assert_eq!(
            decision,
            Decision::Promote {
                instance: "db-2".into(),
                lsn_gap_bytes: 0
            }
        );
    }

    #[test]
    fn unready_fenced_or_disconnected_standbys_are_not_candidates() {
        let mut unready = standby("db-2", "0/3000000", "0/3000000");
        unready.ready = false;
        let mut fenced = standby("db-3", "0/3000000", "0/3000000");
        fenced.fenced = true;
        let mut orphan = standby("db-4", "0/3000000", "0/3000000");
        orphan.upstream = None;
        let mut primary = standby("db-5", "0/3000000", "0/3000000");
        primary.role = InstanceRole::Primary;
        let decision = decide_with(
            &[unready, fenced, orphan, primary],
            "0/3000000",
            &[],
            DataDurability::Preferred,
            false,
        );
        assert_eq!(decision, Decision::NoCandidate);
    }

    #[test]
    fn lsns_compare_numerically_across_the_slash() {
        assert!(lsn("1/0").expect("valid") > lsn("0/FFFFFFFF").expect("valid"));
        assert_eq!(lsn("0/10"), Some(16));
        assert_eq!(lsn("garbage"), None);
    }
}
