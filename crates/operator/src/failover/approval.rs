//! Approvals name what they approve (R25, R29): a failover that
//! `dataDurability: required` blocked gets an identity, recorded in
//! `status.failover.blocked.id`, and only a `tusk.dev/approve-data-loss`
//! annotation quoting that identity approves it. An approval left from an
//! earlier failover, or written for a decision that has since changed (the
//! best standby, a larger gap), approves nothing: it is reported and
//! removed. A gap that shrinks (the standby caught up, or the failed
//! primary's last position was read again) keeps the decision: it loses
//! no more than the recorded "up to" that a person read and approved, and
//! an approval is not rejected for a figure that moved in its favour.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tusk_api::v1alpha1::BlockedFailover;

/// The identity of the decision to promote `to` in place of `from`,
/// possibly losing `gap` bytes, blocked since `since`: ten hex digits of
/// a 64-bit FNV-1a hash, stable across operator versions and restarts.
pub fn decision_id(from: &str, to: &str, gap: u64, since: Timestamp) -> String {
    let text = format!("{from}\n{to}\n{gap}\n{}", since.as_second());
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{:010x}", hash >> 24)
}

/// The blocked decision to record: the previous one, unchanged, while it
/// is the same decision (same failed primary and standby, a gap no larger
/// than recorded); a new one, blocked from `now`, otherwise.
pub fn blocked(
    previous: Option<&BlockedFailover>,
    from: &str,
    to: &str,
    gap: u64,
    now: Timestamp,
) -> BlockedFailover {
    let gap_bytes = i64::try_from(gap).unwrap_or(i64::MAX);
    if let Some(same) =
        previous.filter(|p| p.from == from && p.to == to && gap_bytes <= p.lsn_gap_bytes)
    {
        return same.clone();
    }
    BlockedFailover {
        id: decision_id(from, to, gap, now),
        from: from.to_owned(),
        to: to.to_owned(),
        lsn_gap_bytes: gap_bytes,
        since: Time(now),
        rejected_approval: None,
    }
}

/// What an approval annotation does to a blocked decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// No approval was given.
    Absent,
    /// It quotes the decision's identity: promote.
    Approves,
    /// It quotes something else (another or an earlier decision): it
    /// approves nothing.
    Rejected(String),
}

/// Judges the annotation value `given` against `blocked`.
pub fn judge(given: Option<&str>, blocked: &BlockedFailover) -> Approval {
    match given.map(str::trim) {
        None => Approval::Absent,
        Some(value) if value == blocked.id => Approval::Approves,
        Some(value) => Approval::Rejected(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a time")
    }

    #[test]
    fn a_blocked_decision_keeps_its_identity_until_it_changes() {
        let first = blocked(None, "db-1", "db-2", 1024, at("2026-12-02T10:00:00Z"));
        assert_eq!(first.id.len(), 10);
        // The same decision a second later: same identity, same start.
        let again = blocked(
            Some(&first),
            "db-1",
            "db-2",
            1024,
            at("2026-12-02T10:00:01Z"),
        );
        assert_eq!(again, first);
        // A smaller gap, as when the best standby catches up or the failed
        // primary's position is read again: the same decision, its
        // recorded "up to" unchanged.
        let smaller = blocked(
            Some(&first),
            "db-1",
            "db-2",
            512,
            at("2026-12-02T10:00:02Z"),
        );
        assert_eq!(smaller, first);
        // Another standby, another gap, another failure: another identity.
        let later = at("2026-12-02T10:05:00Z");
        for (from, to, gap) in [
            ("db-1", "db-3", 1024),
            ("db-1", "db-2", 2048),
            ("db-2", "db-3", 1024),
        ] {
            let other = blocked(Some(&first), from, to, gap, later);
            assert_ne!(other.id, first.id, "{from} {to} {gap}");
            assert_eq!(other.since, Time(later));
        }
        // The same failure blocked again later is a new decision too.
        assert_ne!(blocked(None, "db-1", "db-2", 1024, later).id, first.id);
    }

    #[test]
    fn only_an_approval_quoting_the_decision_approves_it() {
        let decision = blocked(None, "db-1", "db-2", 1024, at("2026-12-02T10:00:00Z"));
        let id = decision.id.clone();
        // (annotation value, outcome)
        let cases = [
            (None, Approval::Absent),
            (Some(id.as_str()), Approval::Approves),
            (Some(" \u{20}"), Approval::Rejected(String::new())),
            (Some("db-2"), Approval::Rejected("db-2".into())),
            (Some("true"), Approval::Rejected("true".into())),
            (Some("0123456789"), Approval::Rejected("0123456789".into())),
        ];
        for (given, outcome) in cases {
            assert_eq!(judge(given, &decision), outcome, "{given:?}");
        }
    }
}
