//! Whether a failed primary may still be acting as one: its primary lease
//! (the guarantee is described in `tusk_api::primacy`).
//!
//! A failover promotes only when the lease is free, when its holder's
//! manager reports PostgreSQL stopped for want of it (or fenced), or when
//! this operator has watched the same version of the lease stand unrenewed
//! for the lease's whole duration on its own monotonic clock, counted from
//! the version's arrival through the lease watch ([`watch`], which also
//! notices a holder that stopped renewing) or, failing that, its first
//! read ([`observations`]). The lease is read only while the primary is
//! failing.

mod observations;
mod watch;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tusk_api::instance::{InstancePhase, InstanceReport, InstanceRole};

pub use observations::LeaseObservations;
pub use watch::{cluster_of, lease_key, quiet_leases};

/// The lease as read now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseState {
    /// No lease: no manager ever held it (or managers that predate it).
    Absent,
    /// A lease with no holder, at this version.
    Released { version: String },
    /// A holder, its lease's duration and how long this operator has seen
    /// this version unchanged.
    Held {
        holder: String,
        version: String,
        duration: Duration,
        unchanged_for: Duration,
    },
}

/// Whether the failed primary may be replaced now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Yes; the new primary takes the lease over at this version.
    Replace { takeover: Option<String> },
    /// Not before the lease could have expired: wait this long.
    Wait(Duration),
}

/// The verdict for `lease`, given the reports of the instance managers.
pub fn verdict(lease: &LeaseState, reports: &[(&str, &InstanceReport)]) -> Verdict {
    match lease {
        LeaseState::Absent => Verdict::Replace { takeover: None },
        LeaseState::Released { version } => Verdict::Replace {
            takeover: Some(version.clone()),
        },
        LeaseState::Held {
            holder,
            version,
            duration,
            unchanged_for,
        } => {
            let stopped = reports
                .iter()
                .find(|(name, _)| name == holder)
                .is_some_and(|(_, report)| gave_up(report));
            if stopped || unchanged_for >= duration {
                Verdict::Replace {
                    takeover: Some(version.clone()),
                }
            } else {
                Verdict::Wait(duration.saturating_sub(*unchanged_for))
            }
        }
    }
}

/// The holder's manager says PostgreSQL is stopped and stays stopped
/// until it holds the lease again (or for good: fenced).
fn gave_up(report: &InstanceReport) -> bool {
    report.role == InstanceRole::Stopped
        && matches!(
            report.phase,
            InstancePhase::WaitingForLease | InstancePhase::Fenced
        )
}

/// Reads the primary lease of `cluster` in `namespace`.
pub async fn read(
    client: &Client,
    observations: &LeaseObservations,
    namespace: &str,
    cluster: &str,
) -> Result<LeaseState, kube::Error> {
    let name = tusk_api::primacy::lease_name(cluster);
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let Some(lease) = api.get_opt(&name).await? else {
        return Ok(LeaseState::Absent);
    };
    let version = lease.metadata.resource_version.unwrap_or_default();
    let spec = lease.spec.unwrap_or_default();
    let Some(holder) = spec.holder_identity.filter(|h| !h.is_empty()) else {
        return Ok(LeaseState::Released { version });
    };
    let seconds = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .unwrap_or(u64::from(tusk_api::primacy::MAX_LEASE_SECONDS));
    Ok(LeaseState::Held {
        unchanged_for: observations.unchanged_for(
            &lease_key(namespace, &name),
            &version,
            Instant::now(),
        ),
        holder,
        version,
        duration: Duration::from_secs(seconds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(name: &str, role: InstanceRole, phase: InstancePhase) -> InstanceReport {
        let mut report: InstanceReport = serde_json::from_value(serde_json::json!({
            "name": name, "role": "stopped", "phase": "running", "ready": false, "fenced": false,
        }))
        .expect("a minimal report");
        report.role = role;
        report.phase = phase;
        report
    }

    fn held(unchanged: u64) -> LeaseState {
        LeaseState::Held {
            holder: "db-1".into(),
            version: "42".into(),
            duration: Duration::from_secs(5),
            unchanged_for: Duration::from_secs(unchanged),
        }
    }

    fn replace(version: Option<&str>) -> Verdict {
        Verdict::Replace {
            takeover: version.map(str::to_owned),
        }
    }

    #[test]
    fn a_held_lease_delays_the_failover_until_it_expired_or_was_given_up() {
        let stopped = report(
            "db-1",
            InstanceRole::Stopped,
            InstancePhase::WaitingForLease,
        );
        let fenced = report("db-1", InstanceRole::Stopped, InstancePhase::Fenced);
        let restarting = report("db-1", InstanceRole::Stopped, InstancePhase::CrashRecovery);
        let primary = report("db-1", InstanceRole::Primary, InstancePhase::Running);
        let other = report(
            "db-2",
            InstanceRole::Stopped,
            InstancePhase::WaitingForLease,
        );
        type Reports<'a> = Vec<(&'a str, &'a InstanceReport)>;
        let cases: Vec<(LeaseState, Reports, Verdict)> = vec![
            (LeaseState::Absent, vec![], replace(None)),
            (
                LeaseState::Released {
                    version: "7".into(),
                },
                vec![],
                replace(Some("7")),
            ),
            (held(1), vec![], Verdict::Wait(Duration::from_secs(4))),
            (held(5), vec![], replace(Some("42"))),
            (held(9), vec![("db-1", &primary)], replace(Some("42"))),
            (held(1), vec![("db-1", &stopped)], replace(Some("42"))),
            (held(1), vec![("db-1", &fenced)], replace(Some("42"))),
            // A crash restarts PostgreSQL as primary while the lease holds.
            (
                held(1),
                vec![("db-1", &restarting)],
                Verdict::Wait(Duration::from_secs(4)),
            ),
            (
                held(1),
                vec![("db-1", &primary)],
                Verdict::Wait(Duration::from_secs(4)),
            ),
            // Another instance's word is no evidence about the holder.
            (
                held(2),
                vec![("db-2", &other)],
                Verdict::Wait(Duration::from_secs(3)),
            ),
        ];
        for (lease, reports, expected) in cases {
            assert_eq!(verdict(&lease, &reports), expected, "{lease:?} {reports:?}");
        }
    }
}
