//! Instances this operator created and its child caches have not shown
//! yet, as kube-controller-manager's `ControllerExpectations` keep a
//! ReplicaSet from creating pods it already created.
//!
//! A pass reads children from watch caches that lag the API server by a
//! moment. The pass after the one that created an instance may run before
//! the new pod and claim reach the caches (the cluster's own status write
//! triggers it): it would count one instance too few and create another,
//! under the next serial, then remove it again as one too many. So a
//! created instance is remembered until the caches show its pod and its
//! claim, and meanwhile the plan waits for it instead of creating more
//! ([`crate::reconcile`]). The memory is forgotten after [`TIMEOUT`] (an
//! instance deleted before the caches ever saw it), and after a restart,
//! whose first pass waits for the caches' full lists anyway.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a created instance is awaited in the caches at most.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The instance each cluster (`namespace/name`) created last and has not
/// seen since.
#[derive(Debug, Default)]
pub struct Expectations {
    created: Mutex<HashMap<String, (String, Instant)>>,
}

impl Expectations {
    /// `instance` of the cluster `key` was created now.
    pub fn created(&self, key: &str, instance: &str, now: Instant) {
        if let Ok(mut created) = self.created.lock() {
            created.insert(key.to_owned(), (instance.to_owned(), now));
        }
    }

    /// The instance of `key` created and not yet `seen` in the caches, if
    /// any; one seen, or awaited longer than [`TIMEOUT`], is forgotten.
    pub fn awaited(&self, key: &str, seen: impl Fn(&str) -> bool, now: Instant) -> Option<String> {
        let mut created = self.created.lock().ok()?;
        let (instance, at) = created.get(key)?;
        if seen(instance) || now.duration_since(*at) >= TIMEOUT {
            created.remove(key);
            return None;
        }
        Some(instance.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_instance_is_awaited_until_seen_or_given_up() {
        let expectations = Expectations::default();
        let start = Instant::now();
        assert_eq!(expectations.awaited("ns/db", |_| false, start), None);
        expectations.created("ns/db", "db-2", start);
        let later = start + Duration::from_secs(1);
        assert_eq!(
            expectations.awaited("ns/db", |_| false, later).as_deref(),
            Some("db-2")
        );
        assert_eq!(expectations.awaited("ns/other", |_| false, later), None);
        assert_eq!(expectations.awaited("ns/db", |i| i == "db-2", later), None);
        assert_eq!(
            expectations.awaited("ns/db", |_| false, later),
            None,
            "forgotten once seen"
        );
        expectations.created("ns/db", "db-3", start);
        assert_eq!(
            expectations.awaited("ns/db", |_| false, start + TIMEOUT),
            None
        );
        assert_eq!(
            expectations.awaited("ns/db", |_| false, start),
            None,
            "forgotten once given up"
        );
    }
}
