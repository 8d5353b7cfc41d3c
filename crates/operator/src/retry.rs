//! When to try a failed reconcile again (R10): per cluster, exponential
//! back-off with a cap for transient errors, starting from a delay that
//! suits the error's category; permanent errors wait for a spec change.
//!
//! The count of consecutive failures lives in memory only: after an
//! operator restart a failing cluster starts again from the shortest
//! delay, which costs a few retries and loses nothing (R11).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

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
    }
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
    counts: Mutex<HashMap<String, u32>>,
}

impl Failures {
    /// Records one more failure of `key`; returns how many in a row.
    pub fn failed(&self, key: &str) -> u32 {
        let Ok(mut counts) = self.counts.lock() else {
            return 1;
        };
        let count = counts.entry(key.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        *count
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
