//! What this operator has seen of each primary lease, on its own clocks:
//! when each version first arrived, so that "unrenewed for the whole
//! duration" is counted from a renewal's arrival (never before it was
//! sent), and which held leases have gone quiet.
//!
//! Versions arrive through the lease watch ([`super::watch`]) as they are
//! written, and through the reads made while deciding; the first sight of
//! a version counts, so a restarted operator, which sees every lease for
//! the first time, waits a whole duration again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tusk_api::primacy::LeaseTiming;

/// A held lease counts as quiet once it has gone this many renewal periods
/// without a renewal: one lost renewal and half a period of lateness.
const QUIET_AFTER_RENEWALS: f64 = 1.5;

/// One lease version as first seen.
#[derive(Clone, Debug)]
struct Sighting {
    version: String,
    /// First sight, on the monotonic clock and on the wall clock.
    at: Instant,
    wall: Timestamp,
    /// How its holder renews and fences; `None` when it has no holder (or
    /// the version was only seen by a read, which does not say).
    timing: Option<LeaseTiming>,
    /// This version was already reported quiet.
    reported: bool,
}

impl Sighting {
    fn quiet(&self, now: Instant) -> bool {
        self.timing.is_some_and(|timing| {
            now.saturating_duration_since(self.at)
                >= timing.renew_every.mul_f64(QUIET_AFTER_RENEWALS)
        })
    }
}

/// Sightings by lease (`namespace/name`).
#[derive(Default)]
pub struct LeaseObservations(Mutex<HashMap<String, Sighting>>);

impl LeaseObservations {
    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Sighting>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `version` of lease `key` as seen at `now` (a later sight of
    /// the same version changes nothing). `timing` is its holder's
    /// renewal period, `None` when it has no holder.
    pub fn saw(&self, key: &str, version: &str, timing: Option<LeaseTiming>, now: Instant) {
        let mut seen = self.seen();
        match seen.get_mut(key) {
            Some(sighting) if sighting.version == version => {
                sighting.timing = sighting.timing.or(timing);
            }
            _ => {
                let wall = Timestamp::now() - now.elapsed();
                seen.insert(
                    key.to_owned(),
                    Sighting {
                        version: version.to_owned(),
                        at: now,
                        wall,
                        timing,
                        reported: false,
                    },
                );
            }
        }
    }

    /// Lease `key` was deleted.
    pub fn forget(&self, key: &str) {
        self.seen().remove(key);
    }

    /// How long `version` of lease `key` has been seen unchanged at `now`
    /// (zero at its first sight).
    pub fn unchanged_for(&self, key: &str, version: &str, now: Instant) -> Duration {
        self.saw(key, version, None, now);
        self.seen()
            .get(key)
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s.at))
    }

    /// Held leases that have gone quiet since the last call: each version
    /// once.
    pub fn newly_quiet(&self, now: Instant) -> Vec<String> {
        let mut seen = self.seen();
        seen.iter_mut()
            .filter(|(_, s)| !s.reported && s.quiet(now))
            .map(|(key, s)| {
                s.reported = true;
                key.clone()
            })
            .collect()
    }

    /// When held lease `key` was last renewed as this operator saw it (on
    /// the wall clock, to the microsecond), if it has gone quiet by `now`.
    pub fn quiet_since(&self, key: &str, now: Instant) -> Option<Timestamp> {
        self.seen()
            .get(key)
            .filter(|s| s.quiet(now))
            .map(|s| s.wall)
    }

    /// How long after `now` the holder of quiet lease `key` has stopped
    /// PostgreSQL unless it renewed meanwhile: its fence time from its last
    /// renewal as seen (sent no later than it arrived). `None` when the
    /// lease is not quiet or that moment has passed.
    pub fn fenced_in(&self, key: &str, now: Instant) -> Option<Duration> {
        let seen = self.seen();
        let sighting = seen.get(key).filter(|s| s.quiet(now))?;
        let fenced = sighting.at + sighting.timing?.fence_after;
        fenced.checked_duration_since(now).filter(|d| !d.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_version_counts_from_its_first_sight_and_a_new_one_starts_over() {
        let seen = LeaseObservations::default();
        let t0 = Instant::now();
        assert_eq!(seen.unchanged_for("ns/a", "1", t0), Duration::ZERO);
        assert_eq!(seen.unchanged_for("ns/a", "1", t0 + SECOND), SECOND);
        assert_eq!(seen.unchanged_for("ns/a", "2", t0 + SECOND), Duration::ZERO);
        assert_eq!(seen.unchanged_for("ns/b", "2", t0 + SECOND), Duration::ZERO);
        // A read of a version the watch delivered earlier counts from then.
        seen.saw("ns/c", "9", Some(LeaseTiming::for_duration(5)), t0);
        assert_eq!(seen.unchanged_for("ns/c", "9", t0 + 3 * SECOND), 3 * SECOND);
    }

    #[test]
    fn a_quiet_lease_says_when_its_holder_has_fenced_itself() {
        let seen = LeaseObservations::default();
        let t0 = Instant::now();
        // 5 s: renewed every second, fenced 3 s after the last renewal.
        seen.saw("ns/held", "1", Some(LeaseTiming::for_duration(5)), t0);
        seen.saw("ns/released", "1", None, t0);
        assert_eq!(
            seen.fenced_in("ns/held", t0 + SECOND),
            None,
            "not quiet yet"
        );
        assert_eq!(seen.fenced_in("ns/held", t0 + 2 * SECOND), Some(SECOND));
        assert_eq!(seen.fenced_in("ns/held", t0 + 3 * SECOND), None, "passed");
        assert_eq!(seen.fenced_in("ns/released", t0 + 2 * SECOND), None);
        assert_eq!(seen.fenced_in("ns/unknown", t0 + 2 * SECOND), None);
    }

    #[test]
    fn a_held_lease_goes_quiet_after_one_and_a_half_renewal_periods() {
        let seen = LeaseObservations::default();
        let t0 = Instant::now();
        seen.saw("ns/held", "1", Some(LeaseTiming::for_duration(5)), t0);
        seen.saw("ns/released", "1", None, t0);
        let half = SECOND / 2;
        assert!(seen.newly_quiet(t0 + SECOND).is_empty());
        assert_eq!(seen.quiet_since("ns/held", t0 + SECOND), None);
        assert_eq!(seen.newly_quiet(t0 + SECOND + half), ["ns/held"]);
        // Reported once per version.
        assert!(seen.newly_quiet(t0 + 5 * SECOND).is_empty());
        let since = seen.quiet_since("ns/held", t0 + 2 * SECOND).expect("quiet");
        assert!(
            Timestamp::now().duration_since(since).as_secs_f64() < 1.0,
            "{since}"
        );
        assert_eq!(seen.quiet_since("ns/released", t0 + 60 * SECOND), None);
        // A renewal makes it live again, and a new silence is reported anew.
        seen.saw(
            "ns/held",
            "2",
            Some(LeaseTiming::for_duration(5)),
            t0 + 2 * SECOND,
        );
        assert_eq!(seen.quiet_since("ns/held", t0 + 2 * SECOND), None);
        assert_eq!(seen.newly_quiet(t0 + 4 * SECOND), ["ns/held"]);
        seen.forget("ns/held");
        assert_eq!(seen.quiet_since("ns/held", t0 + 9 * SECOND), None);
    }
}
