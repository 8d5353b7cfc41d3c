//! When the primary counts as failed: pure, from the pod's and the
//! instance manager's evidence to the time the failover delay runs from.

use k8s_openapi::jiff::Timestamp;
use tusk_api::instance::{InstanceReport, InstanceRole};

/// The primary serves: its pod is ready and its manager reports it as the
/// primary (a manager that does not answer counts as unavailable).
pub fn primary_healthy(pod_ready: bool, report: Option<&InstanceReport>) -> bool {
    pod_ready && report.is_some_and(|r| r.role == InstanceRole::Primary && r.ready)
}

/// Since when the primary counts as unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unavailable {
    pub since: Timestamp,
    /// `since` is a Kubernetes timestamp: whole seconds, rounded down.
    pub whole_seconds: bool,
}

impl Unavailable {
    /// From a timestamp Kubernetes recorded (whole seconds).
    pub fn recorded(since: Timestamp) -> Self {
        Unavailable {
            since,
            whole_seconds: true,
        }
    }

    /// From this operator's own clock (microseconds).
    pub fn precise(since: Timestamp) -> Self {
        Unavailable {
            since,
            whole_seconds: false,
        }
    }
}

/// Since when the primary counts as unavailable: the earliest evidence of
/// the failure, so `delaySeconds` runs from it and not from whenever a
/// reconcile happened to notice:
/// - the operator's first observation (the PrimaryAvailable condition
///   turning False);
/// - the kubelet's (the pod's Ready condition turning False);
/// - the last renewal of the primary lease this operator saw, when the
///   lease has gone quiet since (its holder stopped renewing: the last
///   sign of life of the whole instance).
///
/// Evidence from before `primary_since` (when a failover or switchover
/// made this instance the primary) is about its time as a standby, whose
/// pod turns unready when its primary fails, and does not count. Never
/// later than `now`.
pub fn unavailable_since(
    observed: Option<Timestamp>,
    pod_not_ready: Option<Timestamp>,
    quiet_lease: Option<Timestamp>,
    primary_since: Option<Timestamp>,
    now: Timestamp,
) -> Unavailable {
    let first = observed
        .into_iter()
        .chain(pod_not_ready)
        .map(Unavailable::recorded)
        .chain(quiet_lease.map(Unavailable::precise))
        .fold(Unavailable::precise(now), |a, b| {
            if b.since < a.since { b } else { a }
        });
    match primary_since {
        Some(since) if since > first.since => {
            if since >= now {
                Unavailable::precise(now)
            } else {
                Unavailable::recorded(since)
            }
        }
        _ => first,
    }
}

/// How much longer to wait before a failover, or `None` once the primary
/// has been unavailable for `delay_seconds`. A time Kubernetes recorded
/// carries whole seconds, rounded down, so it may be up to a second early:
/// one more second is waited then, and a primary is never replaced sooner
/// than its delay after the first evidence of its failure.
pub fn delay_left(
    unavailable: Unavailable,
    now: Timestamp,
    delay_seconds: i32,
) -> Option<std::time::Duration> {
    let rounding = i64::from(unavailable.whole_seconds);
    let needed =
        k8s_openapi::jiff::SignedDuration::from_secs(i64::from(delay_seconds.max(0)) + rounding);
    let left = needed - now.duration_since(unavailable.since);
    left.is_positive()
        .then(|| std::time::Duration::try_from(left).ok())
        .flatten()
}
