//! The Node's conditions as a kubelet reports them: `MemoryPressure`,
//! `DiskPressure` and `PIDPressure` measured against the kubelet's default
//! hard eviction thresholds (`memory.available<100Mi`,
//! `nodefs.available<10%`, and a PID table 90% full), and `Ready`, which
//! says the kubelet works and stays `True` under pressure, as a kubelet's
//! does (pressure keeps pods away through taints, not through Ready).
//!
//! A condition's `lastTransitionTime` changes only when its status does,
//! compared with what the Node says now (the node lifecycle controller
//! sets conditions `Unknown` while the kubelet is silent);
//! `lastHeartbeatTime` is every report's time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::NodeCondition;
use serde_json::{Value, json};

/// The memory the kubelet keeps back from pods (its eviction threshold).
pub const MEMORY_RESERVE_BYTES: u64 = 100 * 1024 * 1024;

/// One measured condition: its type, whether it holds, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub kind: &'static str,
    pub holds: bool,
    pub reason: &'static str,
    pub message: String,
}

/// A line of `/proc/meminfo` in bytes.
pub fn meminfo_bytes(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let rest = text
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

fn free_disk_fraction(dir: &Path) -> Option<f64> {
    let stats = nix::sys::statvfs::statvfs(dir).ok()?;
    let total = stats.blocks() as f64;
    (total > 0.0).then(|| stats.blocks_available() as f64 / total)
}

fn pid_use_fraction() -> Option<f64> {
    let max: f64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(crate::procfs::pids().len() as f64 / max)
}

/// The pressure conditions, measured now for a node whose data lives in
/// `data_dir`. What cannot be measured counts as no pressure.
pub fn measure(data_dir: &Path) -> Vec<Observed> {
    let memory = meminfo_bytes("MemAvailable").is_some_and(|free| free < MEMORY_RESERVE_BYTES);
    let disk = free_disk_fraction(data_dir).is_some_and(|free| free < 0.10);
    let pids = pid_use_fraction().is_some_and(|used| used > 0.90);
    vec![
        pressure(
            "MemoryPressure",
            memory,
            "memory",
            "KubeletHasInsufficientMemory",
            "KubeletHasSufficientMemory",
        ),
        pressure(
            "DiskPressure",
            disk,
            "disk",
            "KubeletHasDiskPressure",
            "KubeletHasNoDiskPressure",
        ),
        pressure(
            "PIDPressure",
            pids,
            "PID",
            "KubeletHasInsufficientPID",
            "KubeletHasSufficientPID",
        ),
    ]
}

fn pressure(
    kind: &'static str,
    holds: bool,
    what: &str,
    under: &'static str,
    free: &'static str,
) -> Observed {
    let (reason, message) = if holds {
        (under, format!("kubelet has {what} pressure"))
    } else {
        (free, format!("kubelet has sufficient {what} available"))
    };
    Observed {
        kind,
        holds,
        reason,
        message,
    }
}

/// The Ready condition of a kubelet that runs and reports.
pub fn ready() -> Observed {
    Observed {
        kind: "Ready",
        holds: true,
        reason: "KubeletReady",
        message: "kubelet is posting ready status".into(),
    }
}

/// The conditions' transition times across reports.
#[derive(Debug, Default)]
pub struct Transitions {
    since: BTreeMap<&'static str, (bool, String)>,
    data_dir: PathBuf,
}

impl Transitions {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            since: BTreeMap::new(),
            data_dir: data_dir.to_owned(),
        }
    }

    /// Takes the Node's conditions as the API has them now, so that a
    /// status another writer changed (to `Unknown`) transitions anew.
    pub fn seen(&mut self, current: &[NodeCondition]) {
        for condition in current {
            let Some(kind) = self.since.keys().find(|k| **k == condition.type_).copied() else {
                continue;
            };
            let since = condition
                .last_transition_time
                .as_ref()
                .map(|t| t.0.to_string());
            match (condition.status.as_str(), since) {
                ("True", Some(since)) => self.since.insert(kind, (true, since)),
                ("False", Some(since)) => self.since.insert(kind, (false, since)),
                _ => self.since.remove(kind),
            };
        }
    }

    /// The conditions measured now, as the Node's `status.conditions`.
    pub fn report(&mut self, now: &str) -> Value {
        let mut observed = measure(&self.data_dir);
        observed.push(ready());
        let conditions: Vec<Value> = observed
            .into_iter()
            .map(|condition| self.condition(condition, now))
            .collect();
        Value::Array(conditions)
    }

    fn condition(&mut self, observed: Observed, now: &str) -> Value {
        let entry = self
            .since
            .entry(observed.kind)
            .or_insert_with(|| (observed.holds, now.to_owned()));
        if entry.0 != observed.holds {
            *entry = (observed.holds, now.to_owned());
        }
        json!({
            "type": observed.kind,
            "status": if observed.holds { "True" } else { "False" },
            "reason": observed.reason,
            "message": observed.message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": entry.1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_is_reported_apart_from_readiness() {
        let pressed = pressure("DiskPressure", true, "disk", "KubeletHasDiskPressure", "x");
        assert_eq!(pressed.message, "kubelet has disk pressure");
        assert!(ready().holds, "a kubelet under pressure still posts Ready");
        assert_eq!(measure(Path::new("/")).len(), 3);
    }

    #[test]
    fn a_transition_time_moves_only_when_the_status_changes() {
        let mut transitions = Transitions::new(Path::new("/"));
        let holds = |holds| Observed {
            kind: "Ready",
            holds,
            reason: "r",
            message: String::new(),
        };
        let first = transitions.condition(holds(true), "t1");
        let again = transitions.condition(holds(true), "t2");
        let changed = transitions.condition(holds(false), "t3");
        assert_eq!(first["lastTransitionTime"], "t1");
        assert_eq!(again["lastTransitionTime"], "t1");
        assert_eq!(again["lastHeartbeatTime"], "t2");
        assert_eq!(changed["lastTransitionTime"], "t3");
        let unknown: NodeCondition = serde_json::from_value(json!({
            "type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }))
        .expect("a condition");
        transitions.seen(&[unknown]);
        let back = transitions.condition(holds(false), "t4");
        assert_eq!(
            back["lastTransitionTime"], "t4",
            "Unknown -> False is a transition"
        );
    }
}
