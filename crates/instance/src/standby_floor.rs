//! A hot standby's floor for the settings PostgreSQL requires at least at
//! its primary's values ([`tusk_api::instance::STANDBY_MINIMUMS`]): a
//! standby started with less refuses to start ("recovery aborted because
//! of insufficient parameter settings").
//!
//! The values it must meet are in its own control file: a clone copies
//! the primary's, and replaying the primary's parameter-change record
//! updates them, which is what PostgreSQL checks at a standby's start. So
//! a standby's configuration holds each minimum the spec sets at
//! `max(declared, control file)`. A standby re-created or restarted while
//! its primary still runs a higher value (a lowered `max_connections`
//! whose primary has not restarted yet) starts and replays; once the
//! primary restarted with the lower value and the standby replayed that,
//! its floor drops, the declared value is written, and the standby
//! reports it pending a restart like any other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Each standby minimum and the line of `pg_controldata` that shows the
/// value recorded for it.
const CONTROL_LINES: [(&str, &str); 5] = [
    ("max_connections", "max_connections setting:"),
    ("max_locks_per_transaction", "max_locks_per_xact setting:"),
    ("max_prepared_transactions", "max_prepared_xacts setting:"),
    ("max_wal_senders", "max_wal_senders setting:"),
    ("max_worker_processes", "max_worker_processes setting:"),
];

/// The standby minimums `pg_controldata` printed, by parameter name.
pub fn parse(control_data: &str) -> BTreeMap<&'static str, u64> {
    CONTROL_LINES
        .iter()
        .filter_map(|(name, label)| {
            let value = control_data
                .lines()
                .find_map(|line| line.trim_start().strip_prefix(label))?
                .trim()
                .parse()
                .ok()?;
            Some((*name, value))
        })
        .collect()
}

/// `parameters` with every standby minimum the spec sets raised to its
/// floor: one set lower takes the floor's value. Minimums the spec leaves
/// unset keep PostgreSQL's default, and those the operator owns are left
/// to it (the same on every instance).
pub fn raise(
    parameters: &BTreeMap<String, String>,
    floor: &BTreeMap<&'static str, u64>,
) -> BTreeMap<String, String> {
    let mut raised = parameters.clone();
    for (name, minimum) in floor {
        if tusk_postgres::parameters::is_operator_owned(name) {
            continue;
        }
        let declared = parameters
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(n, v)| (n.clone(), v.trim().parse::<u64>().ok()));
        match declared {
            // A value that is not a plain number is the spec's to fix;
            // rendering refuses it with the rule it breaks.
            Some((_, None)) => {}
            Some((_, Some(value))) if value >= *minimum => {}
            Some((spelled, Some(_))) => {
                raised.insert(spelled, minimum.to_string());
            }
            // Not declared: left to PostgreSQL's default, as on the
            // primary. A line that comes and goes with the role would
            // leave the setting pending a restart at every switchover
            // (PostgreSQL marks a removed postmaster setting so whatever
            // its value).
            None => {}
        }
    }
    raised
}

/// The names whose value `raised` changed from `declared` (what
/// [`raise`] held at the floor).
pub fn held(declared: &BTreeMap<String, String>, raised: &BTreeMap<String, String>) -> Vec<String> {
    raised
        .iter()
        .filter(|(name, value)| declared.get(*name) != Some(*value))
        .map(|(name, _)| name.clone())
        .collect()
}

/// The floor of a data directory, read with `pg_controldata` when its
/// control file changed since the last reading (a standby's configuration
/// is rendered on every pass). Clones share the reading.
#[derive(Clone, Debug, Default)]
pub struct FloorCache {
    last: Arc<Mutex<Option<Reading>>>,
    /// The minimums the last rendering of the live data directory held
    /// above their declared value.
    held: Arc<Mutex<Vec<String>>>,
}

type Reading = (PathBuf, SystemTime, BTreeMap<&'static str, u64>);

impl FloorCache {
    /// Records which minimums the live data directory's configuration
    /// holds above their declared value (none on a primary).
    pub fn set_held(&self, held: Vec<String>) {
        *self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = held;
    }

    /// The minimums held above their declared value, as last rendered.
    pub fn held(&self) -> Vec<String> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The floor of `pgdata` using `pg_controldata` from `bin_dir`; empty
    /// (no floor) when the control file or the program cannot be read,
    /// which is logged.
    pub fn read(&self, bin_dir: &Path, pgdata: &Path) -> BTreeMap<&'static str, u64> {
        let control = pgdata.join("global").join("pg_control");
        let Ok(modified) = std::fs::metadata(&control).and_then(|m| m.modified()) else {
            return BTreeMap::new();
        };
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((path, stamp, floor)) = last.as_ref()
            && path == pgdata
            && *stamp == modified
        {
            return floor.clone();
        }
        // A few milliseconds, local: run in place rather than through the
        // runtime, since rendering is synchronous.
        let output = std::process::Command::new(bin_dir.join("pg_controldata"))
            .arg(pgdata)
            .env("LC_ALL", "C")
            .output();
        let floor = match output {
            Ok(output) if output.status.success() => {
                parse(&String::from_utf8_lossy(&output.stdout))
            }
            Ok(output) => {
                tracing::warn!(
                    pgdata = %pgdata.display(),
                    stderr = %String::from_utf8_lossy(&output.stderr).trim(),
                    "pg_controldata failed: the standby's settings are not held at its primary's"
                );
                BTreeMap::new()
            }
            Err(error) => {
                tracing::warn!(%error, "cannot run pg_controldata: the standby's settings are not held at its primary's");
                BTreeMap::new()
            }
        };
        *last = Some((pgdata.to_owned(), modified, floor.clone()));
        floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTROL_DATA: &str = "\
pg_control version number:            1300
wal_level setting:                    replica
wal_log_hints setting:                on
max_connections setting:              100
max_worker_processes setting:         8
max_wal_senders setting:              10
max_prepared_xacts setting:           0
max_locks_per_xact setting:           64
track_commit_timestamp setting:       off
";

    fn parameters(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_minimum_is_read_from_pg_controldata() {
        let floor = parse(CONTROL_DATA);
        assert_eq!(floor.len(), 5, "{floor:?}");
        assert_eq!(floor["max_connections"], 100);
        assert_eq!(floor["max_locks_per_transaction"], 64);
        assert_eq!(floor["max_prepared_transactions"], 0);
        assert_eq!(floor["max_worker_processes"], 8);
        assert!(parse("garbage\nmax_connections setting: many\n").is_empty());
    }

    #[test]
    fn a_declared_value_below_the_primarys_is_raised_and_others_are_kept() {
        let floor = parse(CONTROL_DATA);
        let declared = parameters(&[
            ("max_connections", "90"),
            ("max_worker_processes", "16"),
            ("work_mem", "8MB"),
        ]);
        let raised = raise(&declared, &floor);
        assert_eq!(raised["max_connections"], "100");
        assert_eq!(raised["max_worker_processes"], "16");
        assert_eq!(raised["work_mem"], "8MB");
        // Unset minimums stay unset; the owned one is left.
        assert_eq!(raised.len(), 3, "{raised:?}");
    }

    #[test]
    fn a_value_that_is_not_a_number_is_left_for_validation_to_refuse() {
        let floor = parse(CONTROL_DATA);
        let raised = raise(&parameters(&[("MAX_CONNECTIONS", "lots")]), &floor);
        assert_eq!(raised["MAX_CONNECTIONS"], "lots");
        assert!(!raised.contains_key("max_connections"), "{raised:?}");
    }
}
