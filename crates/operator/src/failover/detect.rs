//! When the primary counts as failed: pure, from the pod's and the
//! instance manager's evidence to the time the failover delay runs from.

use k8s_openapi::jiff::Timestamp;
use tusk_api::instance::{InstanceReport, InstanceRole};

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
