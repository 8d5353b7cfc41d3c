//! Deciding again (R25): a standby chosen to replace the primary has
//! `spec.failover.promotionTimeoutSeconds` from the decision to report that
//! it serves. One that does not (it died, hangs, or its pod is being
//! deleted) is abandoned, and the failover chooses again among the others,
//! never the abandoned one. Pure.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What the chosen standby's state means for its promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// It still has this long to serve.
    Pending(std::time::Duration),
    /// Give it up, and why.
    Abandon(String),
}

/// Judges the promotion of `target`, decided at `decided`. `deleting`:
/// its pod is being deleted, so it will not complete.
pub fn judge(
    target: &str,
    decided: Timestamp,
    now: Timestamp,
    timeout_seconds: i32,
    deleting: bool,
) -> Promotion {
    if deleting {
        return Promotion::Abandon(format!("the pod of {target} is being deleted"));
    }
    let timeout = SignedDuration::from_secs(i64::from(timeout_seconds.max(0)));
    // A decision recorded ahead of this clock counts from now.
    let elapsed = now.duration_since(decided).max(SignedDuration::ZERO);
    let left = timeout - elapsed;
    match std::time::Duration::try_from(left) {
        Ok(left) if !left.is_zero() => Promotion::Pending(left),
        _ => Promotion::Abandon(format!(
            "{target} did not report serving as the primary within {timeout_seconds} s \
             of the decision"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_promotion_is_abandoned_after_its_timeout_or_when_its_pod_goes() {
        let at = |s: &str| s.parse::<Timestamp>().expect("a time");
        let decided = at("2026-12-02T10:00:00Z");
        // (now, deleting, abandoned, time left in ms)
        let cases = [
            ("2026-12-02T10:00:00Z", false, false, Some(30_000)),
            ("2026-12-02T10:00:29.5Z", false, false, Some(500)),
            ("2026-12-02T10:00:30Z", false, true, None),
            ("2026-12-02T10:05:00Z", false, true, None),
            ("2026-12-02T10:00:01Z", true, true, None),
            // A decision recorded ahead of our clock: the whole timeout, no more.
            ("2026-12-02T09:59:50Z", false, false, Some(30_000)),
        ];
        for (now, deleting, abandoned, left) in cases {
            let judged = judge("db-2", decided, at(now), 30, deleting);
            match judged {
                Promotion::Pending(d) => {
                    assert!(!abandoned, "{now}");
                    assert_eq!(Some(d.as_millis()), left, "{now}");
                }
                Promotion::Abandon(why) => {
                    assert!(abandoned, "{now}: {why}");
                    assert!(why.contains("db-2"), "{why}");
                }
            }
        }
    }
}
