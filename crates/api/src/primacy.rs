//! Lease-held primacy: the contract between the operator and the instance
//! managers that bounds split brain.
//!
//! The primary's instance manager holds a `coordination.k8s.io/v1` Lease
//! named [`lease_name`] and renews it every [`LeaseTiming::renew_every`].
//! PostgreSQL runs as a primary only while its manager holds the lease:
//! when no renewal has succeeded for [`LeaseTiming::fence_after`] (measured
//! from the moment the last successful renewal was *sent*, on the
//! manager's monotonic clock), every PostgreSQL process of the instance is
//! killed: by the manager before it does anything else, and by a watchdog
//! process beside it that the manager hands the deadline after every
//! renewal, when the manager itself hangs or died (the instance manager's
//! `fence` module).
//!
//! The operator replaces a failed primary only when
//! - the lease is absent, released or held by another instance;
//! - the old primary's manager reports that it stopped PostgreSQL for want
//!   of the lease (or is fenced); or
//! - the operator has seen the same version of the lease, unrenewed, for
//!   the lease's whole `leaseDurationSeconds` on its own monotonic clock.
//!
//! It then records that version in `status.primaryLeaseTakeover`, and the
//! chosen instance's manager takes the lease over at exactly that version
//! (an update the API server refuses if the holder renewed meanwhile).
//!
//! Why this holds without synchronised clocks: the operator cannot observe
//! a renewal before it was sent, so its count of `duration` starts no
//! earlier than the holder's count of `fence_after`. The holder has
//! stopped before the operator acts as long as the two clocks' rates
//! differ by less than `duration / fence_after` (5/3 here), less the time
//! the kill takes (milliseconds).
//!
//! Should the watchdog hang with the manager while PostgreSQL's backends
//! run on, nothing stops them, so the standbys withhold their
//! confirmations as well: a standby streams only from the holder of a
//! lease whose version it saw change within `fence_after` (the instance
//! manager's `primacy::view`).
//! It thus stops confirming before the operator's `duration` has run out,
//! as long as a lease change reaches it less than `duration - fence_after`
//! after it reaches the operator.

use std::time::Duration;

/// The primary lease of `cluster`.
pub fn lease_name(cluster: &str) -> String {
    format!("{cluster}-primary")
}

/// The cluster whose primary lease is named `lease`.
pub fn cluster_of_lease(lease: &str) -> Option<&str> {
    lease.strip_suffix("-primary").filter(|c| !c.is_empty())
}

/// How the primary lease is held, derived from
/// `spec.failover.delaySeconds` so that a lease expires no later than a
/// failover would be decided: a shorter delay means more frequent renewals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// `leaseDurationSeconds`: how long the operator waits on an unrenewed
    /// lease before it counts as expired.
    pub duration: Duration,
    /// How often the holder renews.
    pub renew_every: Duration,
    /// How long after its last successful renewal the holder stops
    /// PostgreSQL.
    pub fence_after: Duration,
}

/// Shortest lease: one second (`leaseDurationSeconds` counts whole
/// seconds), for `delaySeconds` 0 and 1: renewed every 200 ms, so that two
/// lost or late renewals still leave one before the fence at 600 ms. The
/// price of so short a lease: a primary whose renewals the API server does
/// not acknowledge for 600 ms stops PostgreSQL, as a failover delay of 0
/// asks for.
pub const MIN_LEASE_SECONDS: u32 = 1;
/// Longest lease: a long failover delay need not mean a long fence time.
pub const MAX_LEASE_SECONDS: u32 = 15;

impl LeaseTiming {
    /// The timing for a failover delay of `delay_seconds`.
    pub fn for_delay(delay_seconds: i32) -> Self {
        let seconds = u32::try_from(delay_seconds)
            .unwrap_or(0)
            .clamp(MIN_LEASE_SECONDS, MAX_LEASE_SECONDS);
        Self::for_duration(seconds)
    }

    /// The timing of a lease of `seconds` (as written in the lease).
    pub fn for_duration(seconds: u32) -> Self {
        let duration = Duration::from_secs(u64::from(seconds.max(1)));
        LeaseTiming {
            duration,
            renew_every: duration / 5,
            fence_after: duration * 3 / 5,
        }
    }

    /// `leaseDurationSeconds` as the Lease records it.
    pub fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_fences_well_before_the_lease_expires() {
        for delay in [-1, 0, 1, 2, 5, 10, 30, 3600] {
            let timing = LeaseTiming::for_delay(delay);
            let seconds = timing.duration.as_secs();
            assert!((1..=15).contains(&seconds), "delay {delay}: {seconds} s");
            // At least two renewals may be lost before the fence.
            assert!(timing.renew_every * 2 < timing.fence_after, "{timing:?}");
            // The margin tolerates clock rates differing by 60 %.
            assert!(timing.fence_after.as_secs_f64() * 1.6 <= timing.duration.as_secs_f64() + 1e-9);
        }
        assert_eq!(LeaseTiming::for_delay(5).duration, Duration::from_secs(5));
        assert_eq!(
            LeaseTiming::for_delay(5).fence_after,
            Duration::from_secs(3)
        );
        // The shortest: a failover delay of 0 or 1 s waits for no more.
        assert_eq!(LeaseTiming::for_delay(0).duration, Duration::from_secs(1));
        assert_eq!(LeaseTiming::for_delay(1).duration, Duration::from_secs(1));
        assert_eq!(
            LeaseTiming::for_delay(0).renew_every,
            Duration::from_millis(200)
        );
        assert_eq!(
            LeaseTiming::for_delay(0).fence_after,
            Duration::from_millis(600)
        );
        assert_eq!(LeaseTiming::for_delay(2).duration, Duration::from_secs(2));
    }

    #[test]
    fn a_lease_reads_back_its_own_timing() {
        let timing = LeaseTiming::for_delay(7);
        assert_eq!(
            LeaseTiming::for_duration(timing.duration_seconds() as u32),
            timing
        );
        assert_eq!(lease_name("db"), "db-primary");
        assert_eq!(cluster_of_lease(&lease_name("db")), Some("db"));
        assert_eq!(cluster_of_lease("-primary"), None);
        assert_eq!(cluster_of_lease("db-leader"), None);
    }
}
