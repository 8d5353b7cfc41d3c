//! Planned switchover (R25): a person asks, with `tusk promote` or the
//! `tusk.dev/promote` annotation, for a standby to become the primary.
//!
//! The operator only moves `status.targetPrimary`; the instance managers
//! do the rest in an order that loses no acknowledged write: the former
//! primary sees it is no longer the target and shuts down cleanly (a fast
//! shutdown sends all its WAL to the connected standbys before it exits),
//! the target waits for its WAL receiver to stop (so that WAL is in), then
//! promotes, and the former primary rewinds if needed and follows it.
//!
//! A request is acted on once and then removed from the cluster, whether
//! it was carried out or refused (with an event saying why), so it never
//! fires again later, after a failover moved the primary elsewhere.

use tusk_api::instance::{InstanceReport, InstanceRole};

/// What to do about a switchover request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Make this instance the target primary.
    Start { to: String },
    /// The requested instance is the primary already: just clear the request.
    Done,
    /// Not now, and why (the request is cleared; ask again).
    Refuse { reason: String },
}

/// Judges a request for `requested` while `primary` is the target primary.
/// `primary_serving` is true when the primary is available and current;
/// `reports` are the instance managers' answers of this reconcile.
pub fn evaluate(
    requested: &str,
    primary: &str,
    primary_serving: bool,
    reports: &std::collections::BTreeMap<String, InstanceReport>,
) -> Request {
    if requested == primary {
        return Request::Done;
    }
    if !primary_serving {
        return Request::Refuse {
            reason: format!(
                "the primary {primary} is not serving; a failover, not a switchover, replaces it"
            ),
        };
    }
    let Some(report) = reports.get(requested) else {
        return Request::Refuse {
            reason: format!("{requested} is not an instance of this cluster that answers"),
        };
    };
    if report.fenced {
        return Request::Refuse {
            reason: format!("{requested} is fenced"),
        };
    }
    if report.role != InstanceRole::Replica || !report.ready {
        return Request::Refuse {
            reason: format!(
                "{requested} is not a ready, streaming standby (role {:?}, ready {})",
                report.role, report.ready
            ),
        };
    }
    Request::Start {
        to: requested.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tusk_api::instance::InstancePhase;

    fn report(name: &str, role: InstanceRole, ready: bool) -> InstanceReport {
        let mut report: InstanceReport = serde_json::from_value(serde_json::json!({
            "name": name, "role": "replica", "phase": "running", "ready": ready, "fenced": false
        }))
        .expect("report");
        report.role = role;
        report.phase = InstancePhase::Running;
        report
    }

    fn reports() -> BTreeMap<String, InstanceReport> {
        [
            report("db-1", InstanceRole::Primary, true),
            report("db-2", InstanceRole::Replica, true),
            report("db-3", InstanceRole::Replica, false),
        ]
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect()
    }

    #[test]
    fn a_ready_standby_becomes_the_target() {
        assert_eq!(
            evaluate("db-2", "db-1", true, &reports()),
            Request::Start { to: "db-2".into() }
        );
    }

    #[test]
    fn asking_for_the_current_primary_only_clears_the_request() {
        assert_eq!(evaluate("db-1", "db-1", true, &reports()), Request::Done);
    }

    #[test]
    fn a_standby_that_cannot_take_over_is_refused_with_the_reason() {
        let refused =
            |requested: &str, serving: bool| match evaluate(requested, "db-1", serving, &reports())
            {
                Request::Refuse { reason } => reason,
                other => panic!("{requested}: {other:?}"),
            };
        assert!(refused("db-3", true).contains("not a ready, streaming standby"));
        assert!(refused("db-9", true).contains("db-9 is not an instance"));
        assert!(refused("db-2", false).contains("not serving"));
        let mut fenced = reports();
        if let Some(r) = fenced.get_mut("db-2") {
            r.fenced = true;
        }
        assert!(matches!(
            evaluate("db-2", "db-1", true, &fenced),
            Request::Refuse { reason } if reason.contains("fenced")
        ));
    }
}
