//! The global limit on rollouts caused by the operator's version alone: a
//! new operator version rolls at most `limit` clusters at a time
//! (`--max-concurrent-upgrades`), the others wait (`WaitingForSlot`).
//!
//! The slots live in memory, and that is enough: only the leader
//! reconciles, and after a restart every cluster still outdated asks again,
//! so the clusters holding slots are again at most `limit`. A cluster
//! mid-rollout that does not get one back just waits, every instance
//! serving. Slots go back when a cluster's pods are up to date, when its
//! update is no longer the operator's alone, and when it is deleted.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The default limit: small, so an operator upgrade restarts few
/// instances at a time.
pub const DEFAULT_LIMIT: u16 = 2;

#[derive(Debug)]
pub struct Slots {
    limit: usize,
    held: Mutex<BTreeSet<String>>,
}

impl Default for Slots {
    fn default() -> Self {
        Self::new(DEFAULT_LIMIT)
    }
}

impl Slots {
    /// At most `limit` clusters (at least one) at a time.
    pub fn new(limit: u16) -> Self {
        Self {
            limit: usize::from(limit.max(1)),
            held: Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether `cluster` holds a slot, taking a free one if needed.
    pub fn acquire(&self, cluster: &str) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.contains(cluster) {
            return true;
        }
        if held.len() < self.limit {
            held.insert(cluster.to_owned());
            return true;
        }
        false
    }

    /// Gives `cluster`'s slot back, if it holds one.
    pub fn release(&self, cluster: &str) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(cluster);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_of_clusters_roll_for_the_operator_at_once() {
        let slots = Slots::new(2);
        assert!(slots.acquire("shop/a"));
        assert!(slots.acquire("shop/b"));
        assert!(!slots.acquire("shop/c"), "a third waits");
        assert!(slots.acquire("shop/a"), "a holder keeps its slot");
        slots.release("shop/a");
        assert!(slots.acquire("shop/c"), "a released slot goes to the next");
        assert!(!slots.acquire("shop/a"));
        assert!(Slots::new(0).acquire("x"), "a limit of 0 means one");
    }
}
