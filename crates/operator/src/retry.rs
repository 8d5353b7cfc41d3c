//! When to try a failed reconcile again (R10): per cluster, exponential
//! back-off with a cap for transient errors, starting from a delay that
//! suits the error's category; permanent errors wait for a spec change.
//!
//! The count of consecutive failures lives in memory only: after an
//! operator restart a failing cluster starts again from the shortest
//! delay, which costs a few retries and loses nothing (R11).
//!
//! Some failures also hold off the reconciles that watches trigger until
//! the retry is due ([`holds_triggers`]): in a namespace being deleted,
//! every child the deletion removes would otherwise set off another pass
//! that fails the same way at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::ErrorCategory;

/// The longest wait between two tries of one failing cluster.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// The first wait after a failure of `category`; `None` for permanent
/// errors, which wait for a change instead.
fn first_delay(category: ErrorCategory) -> Option<Duration> {
    match category {
        ErrorCategory::InvalidSpec | ErrorCategory::RefusedChange => None,
        // Someone else wrote meanwhile: the next read is fresh.
        ErrorCategory::Conflict => Some(Duration::from_millis(200)),
        // The API server asked us to slow down.
        ErrorCategory::Throttled => Some(Duration::from_secs(10)),
        ErrorCategory::ApiError | ErrorCategory::Forbidden | ErrorCategory::InstanceUnreachable => {
            Some(Duration::from_secs(1))
        }
        // Waits for a person to remove or rename a volume or Secret.
        ErrorCategory::VolumeConflict | ErrorCategory::SecretConflict => {
            Some(Duration::from_secs(15))
        }
        // Nothing can be created until the namespace is gone; the
        // cluster's own deletion comes next and is not held.
        ErrorCategory::NamespaceTerminating => Some(Duration::from_secs(30)),
    }
}

/// Whether a failure of `category` holds off the reconciles that watches
/// trigger until its retry is due: only when no change of a child can
/// make the next pass succeed.
pub fn holds_triggers(category: ErrorCategory) -> bool {
    category == ErrorCategory::NamespaceTerminating
}

/// The wait before try number `failures + 1` of a cluster that failed
/// `failures` times in a row (at least once), the last time with
/// `category`: the first delay doubled per earlier failure, capped.
pub fn delay(category: ErrorCategory, failures: u32) -> Option<Duration> {
    let first = first_delay(category)?;
    let doublings = failures.saturating_sub(1).min(16);
    Some(first.saturating_mul(1 << doublings).min(MAX_DELAY))
}

/// Consecutive failures per cluster (`namespace/name`).
#[derive(Debug, Default)]
pub struct Failures {
    counts: Mutex<HashMap<String, Failing>>,
}

/// One cluster's failures in a row, and until when passes wait.
#[derive(Debug, Default)]
struct Failing {
    count: u32,
    held_until: Option<Instant>,
}

impl Failures {
    /// Records one more failure of `key`; returns how many in a row.
    pub fn failed(&self, key: &str) -> u32 {
        let Ok(mut counts) = self.counts.lock() else {
            return 1;
        };
        let failing = counts.entry(key.to_owned()).or_default();
        failing.count = failing.count.saturating_add(1);
        failing.count
    }

    /// Holds off passes of `key` until `until` (see [`holds_triggers`]).
    pub fn hold(&self, key: &str, until: Instant) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.entry(key.to_owned()).or_default().held_until = Some(until);
        }
    }

    /// How long passes of `key` still wait, as of `now`.
    pub fn held(&self, key: &str, now: Instant) -> Option<Duration> {
        let counts = self.counts.lock().ok()?;
        let until = counts.get(key)?.held_until?;
        (until > now).then(|| until - now)
    }

    /// `key` reconciled successfully: the next failure starts afresh.
    pub fn succeeded(&self, key: &str) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_back_off_exponentially_up_to_the_cap() {
        let api: Vec<u64> = (1..=12)
            .map(|n| delay(ErrorCategory::ApiError, n).map_or(0, |d| d.as_secs()))
            .collect();
        assert_eq!(api, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(
            delay(ErrorCategory::Conflict, 1),
            Some(Duration::from_millis(200))
        );
        assert_eq!(
            delay(ErrorCategory::Throttled, 2),
            Some(Duration::from_secs(20))
        );
        assert_eq!(delay(ErrorCategory::Throttled, u32::MAX), Some(MAX_DELAY));
    }

    #[test]
    fn a_namespace_being_deleted_is_retried_seldom_and_holds_other_triggers() {
        let delays: Vec<u64> = (1..=5)
            .map(|n| delay(ErrorCategory::NamespaceTerminating, n).map_or(0, |d| d.as_secs()))
            .collect();
        assert_eq!(delays, [30, 60, 120, 240, 300]);
        assert!(holds_triggers(ErrorCategory::NamespaceTerminating));
        assert!(!holds_triggers(ErrorCategory::Forbidden));
        assert!(!holds_triggers(ErrorCategory::Conflict));
    }

    #[test]
    fn a_held_cluster_waits_until_its_retry_and_a_success_ends_the_hold() {
        let failures = Failures::default();
        let now = Instant::now();
        assert_eq!(failures.held("ns/a", now), None);
        failures.failed("ns/a");
        failures.hold("ns/a", now + Duration::from_secs(30));
        assert_eq!(
            failures.held("ns/a", now + Duration::from_secs(10)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(failures.held("ns/b", now), None, "one cluster only");
        assert_eq!(failures.held("ns/a", now + Duration::from_secs(30)), None);
        failures.succeeded("ns/a");
        assert_eq!(failures.held("ns/a", now), None);
    }

    #[test]
    fn permanent_errors_wait_for_a_change() {
        assert_eq!(delay(ErrorCategory::InvalidSpec, 1), None);
        assert_eq!(delay(ErrorCategory::RefusedChange, 5), None);
    }

    #[test]
    fn a_success_resets_the_count_of_one_cluster_only() {
        let failures = Failures::default();
        assert_eq!(failures.failed("ns/a"), 1);
        assert_eq!(failures.failed("ns/a"), 2);
        assert_eq!(failures.failed("ns/b"), 1);
        failures.succeeded("ns/a");
        assert_eq!(failures.failed("ns/a"), 1);
        assert_eq!(failures.failed("ns/b"), 2);
    }
}
