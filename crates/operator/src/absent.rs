//! Objects that only this operator creates, read by name (a restore
//! rehearsal's pod and scratch volume), which a pass found absent: they
//! are not read again until the operator creates them, so a cluster with
//! no rehearsal under way costs no request per pass.
//!
//! The memory is this process's: after a restart, or a change of leader,
//! the first pass reads once. It is also forgotten after [`RECHECK`], so
//! an object made behind the operator's back (by a former leader still
//! finishing its last pass, say) is found within that time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an object found absent is taken to stay absent without a
/// read.
pub const RECHECK: Duration = Duration::from_secs(600);

/// When each object (`namespace/name`) was last found absent.
#[derive(Debug, Default)]
pub struct KnownAbsent {
    since: Mutex<HashMap<String, Instant>>,
}

impl KnownAbsent {
    /// Whether `key` was found absent, less than [`RECHECK`] before `now`,
    /// and not created since: no need to read it.
    pub fn absent(&self, key: &str, now: Instant) -> bool {
        let Ok(since) = self.since.lock() else {
            return false;
        };
        since
            .get(key)
            .is_some_and(|at| now.duration_since(*at) < RECHECK)
    }

    /// A read of `key` at `now` found it (`present`) or not.
    pub fn read(&self, key: &str, present: bool, now: Instant) {
        if let Ok(mut since) = self.since.lock() {
            if present {
                since.remove(key);
            } else {
                since.insert(key.to_owned(), now);
            }
        }
    }

    /// The operator is about to create `key`: read it again from now on.
    pub fn creating(&self, key: &str) {
        if let Ok(mut since) = self.since.lock() {
            since.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_found_absent_is_not_read_again_until_it_is_created() {
        let known = KnownAbsent::default();
        let start = Instant::now();
        assert!(!known.absent("shop/orders-rehearsal", start), "never read");
        known.read("shop/orders-rehearsal", false, start);
        assert!(known.absent("shop/orders-rehearsal", start + Duration::from_secs(8)));
        assert!(
            !known.absent("shop/other-rehearsal", start),
            "one object only"
        );
        known.creating("shop/orders-rehearsal");
        assert!(!known.absent("shop/orders-rehearsal", start + Duration::from_secs(9)));
        known.read(
            "shop/orders-rehearsal",
            true,
            start + Duration::from_secs(10),
        );
        assert!(!known.absent("shop/orders-rehearsal", start + Duration::from_secs(20)));
    }

    #[test]
    fn an_absent_object_is_read_again_after_a_while() {
        let known = KnownAbsent::default();
        let start = Instant::now();
        known.read("shop/orders-rehearsal", false, start);
        assert!(known.absent(
            "shop/orders-rehearsal",
            start + RECHECK - Duration::from_secs(1)
        ));
        assert!(!known.absent("shop/orders-rehearsal", start + RECHECK));
    }
}
