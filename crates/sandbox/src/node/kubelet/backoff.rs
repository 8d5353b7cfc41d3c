//! Restart back-off for crashing containers, as the kubelet does it: the
//! first restart is immediate, each further one waits twice as long as the
//! last, up to a cap, and a container that ran long enough without
//! crashing starts over from the beginning.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the second restart (Kubernetes: 10 s).
    pub initial: Duration,
    /// The longest wait (Kubernetes: 5 min).
    pub max: Duration,
    /// A run at least this long resets the back-off (Kubernetes: 10 min).
    pub reset_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

impl Backoff {
    /// The wait before restarting after `crashes` consecutive crashes
    /// (1 for the first).
    pub fn delay(&self, crashes: u32) -> Duration {
        if crashes <= 1 {
            return Duration::ZERO;
        }
        let factor = 2u32.saturating_pow(crashes - 2);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The crash count after a run of `ran` that ended in a crash.
    pub fn next_crashes(&self, crashes: u32, ran: Duration) -> u32 {
        if ran >= self.reset_after {
            1
        } else {
            crashes.saturating_add(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap() {
        let backoff = Backoff::default();
        let waits: Vec<u64> = (1..=8).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(waits, vec![0, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff.delay(u32::MAX), backoff.max);
    }

    #[test]
    fn a_long_run_resets_the_count() {
        let backoff = Backoff::default();
        assert_eq!(backoff.next_crashes(5, Duration::from_secs(1)), 6);
        assert_eq!(backoff.next_crashes(5, Duration::from_secs(601)), 1);
    }
}
