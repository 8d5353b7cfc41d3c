//! Reconciling only a cluster object that includes the operator's own last
//! writes to it.
//!
//! A reconcile reads the cluster from the controller's cache, which the
//! watch updates some time after the operator's own status write. A
//! reconcile triggered in between (a pod changed) would decide from the
//! status before that write: it could undo a failover just decided by
//! writing the old `targetPrimary` back. So every write to a cluster
//! records the resourceVersion it replaced, and a reconcile that finds the
//! cache still at a replaced version waits a moment instead of acting.
//! Status writes also carry the version they were computed from, so the
//! API server refuses one computed from anything older (a second line of
//! defence, and the only one across operator restarts).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The key a cluster is remembered under (`namespace/name`), here and by
/// the retry back-off.
pub fn cluster_key(cluster: &impl kube::ResourceExt) -> String {
    format!(
        "{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    )
}

/// Replaced versions remembered per cluster: a reconcile writes the
/// cluster at most a few times, and the cache lags by at most a few
/// versions.
const REMEMBERED: usize = 8;

/// Versions of each cluster (`namespace/name`) that this operator's own
/// writes replaced.
#[derive(Debug, Default)]
pub struct Freshness {
    replaced: Mutex<HashMap<String, VecDeque<String>>>,
}

impl Freshness {
    /// A write to cluster `key` replaced its version `version` with
    /// `written`. A write that changed nothing (the same object again: the
    /// API server keeps its version) replaced nothing, and no newer
    /// version will come to wait for.
    pub fn replaced(&self, key: &str, version: Option<&str>, written: Option<&str>) {
        if version == written {
            return;
        }
        let (Some(version), Ok(mut replaced)) = (version, self.replaced.lock()) else {
            return;
        };
        let versions = replaced.entry(key.to_owned()).or_default();
        if !versions.iter().any(|v| v == version) {
            versions.push_back(version.to_owned());
        }
        while versions.len() > REMEMBERED {
            versions.pop_front();
        }
    }

    /// Whether `version` of cluster `key` predates one of our own writes.
    pub fn is_stale(&self, key: &str, version: Option<&str>) -> bool {
        let (Some(version), Ok(replaced)) = (version, self.replaced.lock()) else {
            return false;
        };
        replaced
            .get(key)
            .is_some_and(|versions| versions.iter().any(|v| v == version))
    }

    /// Cluster `key` is gone.
    pub fn forget(&self, key: &str) {
        if let Ok(mut replaced) = self.replaced.lock() {
            replaced.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_replaced_by_our_write_is_stale_until_the_cache_moves_on() {
        let freshness = Freshness::default();
        assert!(!freshness.is_stale("ns/db", Some("10")));
        freshness.replaced("ns/db", Some("10"), Some("11"));
        freshness.replaced("ns/db", Some("11"), Some("12"));
        assert!(freshness.is_stale("ns/db", Some("10")));
        assert!(freshness.is_stale("ns/db", Some("11")));
        // What our last write produced, or anything newer, is fresh.
        assert!(!freshness.is_stale("ns/db", Some("12")));
        // Per cluster.
        assert!(!freshness.is_stale("ns/other", Some("10")));
        // An object without a version is never held back.
        assert!(!freshness.is_stale("ns/db", None));
        freshness.forget("ns/db");
        assert!(!freshness.is_stale("ns/db", Some("10")));
    }

    /// A write that changed nothing keeps the version: waiting for a newer
    /// one would wait forever.
    #[test]
    fn a_write_that_changed_nothing_replaced_nothing() {
        let freshness = Freshness::default();
        freshness.replaced("ns/db", Some("136"), Some("136"));
        assert!(!freshness.is_stale("ns/db", Some("136")));
    }

    #[test]
    fn only_the_latest_versions_are_remembered() {
        let freshness = Freshness::default();
        for version in 0..20 {
            freshness.replaced("ns/db", Some(&version.to_string()), None);
        }
        assert!(!freshness.is_stale("ns/db", Some("0")));
        assert!(freshness.is_stale("ns/db", Some("19")));
        assert!(freshness.is_stale("ns/db", Some(&(20 - REMEMBERED).to_string())));
    }
}
