//! The primary (R25): whether it serves, and whether this pass moves it,
//! by a failover ([`failover`]) or a requested switchover ([`switchover`]).
//! Pure: from the previous status, the spec and what was observed to a
//! [`FailoverCheck`] and the events to publish. The time the primary became
//! unavailable is the `PrimaryAvailable` condition's transition time, so a
//! restarted operator keeps counting from the same moment.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tusk_api::instance::InstanceReport;
use tusk_api::labels;
use tusk_api::v1alpha1::{FailoverRecord, PostgresCluster, PostgresClusterStatus};

use super::fetch::Observed;
use crate::children::{named, not_ready_since, pod_ready};
use crate::events::Note;
use crate::failover::{self, Decision, FailoverCheck};
use crate::primacy::{self, Verdict};
use crate::switchover::{self, Request};
use crate::validate::ValidatedCluster;

/// `lastFailover.reason` of a failover a person approved.
pub const APPROVED_FAILOVER: &str = "ApprovedFailover";

/// Judges the recorded primary and, once it has been unavailable for
/// `spec.failover.delaySeconds`, chooses its replacement.
pub fn judge(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    now: Timestamp,
) -> (FailoverCheck, Option<Note>) {
    let Some(previous) = cluster.status.as_ref() else {
        return (FailoverCheck::default(), None);
    };
    // Only a primary that was serving can fail over; one that is still
    // being promoted or bootstrapped is not judged yet.
    let Some(target) = previous
        .target_primary
        .as_deref()
        .filter(|t| previous.current_primary.as_deref() == Some(*t))
    else {
        return (FailoverCheck::default(), None);
    };
    let pod =
        named(&observed.children.pods, target).filter(|p| p.metadata.deletion_timestamp.is_none());
    if failover::primary_healthy(pod.is_some_and(pod_ready), observed.reports.get(target)) {
        let serving = FailoverCheck {
            primary_available: Some(true),
            ..FailoverCheck::default()
        };
        return (serving, None);
    }
    let observed_down =
        tusk_api::conditions::find_condition(&previous.conditions, failover::PRIMARY_AVAILABLE)
            .filter(|c| c.status == "False")
            .map(|c| c.last_transition_time.0);
    // When a failover or switchover made it the primary (the record's time
    // is the moment it was first seen serving).
    let primary_since = crate::status::choice_of_target(previous).map(|record| record.time.0);
    let since = failover::unavailable_since(
        observed_down,
        pod.and_then(not_ready_since),
        primary_since,
        now,
    );
    if let Some(left) = failover::delay_left(since, now, valid.failover.delay_seconds) {
        let waiting = FailoverCheck {
            delay_left: Some(left),
            ..unavailable()
        };
        return (waiting, None);
    }
    let approval = cluster.annotations().get(labels::APPROVE_DATA_LOSS);
    let decision = failover::decide(
        &last_known(previous, valid, target),
        &observed
            .reports
            .iter()
            .map(|(n, r)| (n.as_str(), r))
            .collect::<Vec<_>>(),
        valid.failover.data_durability,
        approval.is_some(),
    );
    // Never a second primary: not while the failed one may hold its lease.
    let takeover = match (&decision, &observed.lease) {
        (Decision::Promote { .. }, Some(lease)) => {
            let reports: Vec<_> = observed
                .reports
                .iter()
                .map(|(n, r)| (n.as_str(), r))
                .collect();
            match primacy::verdict(lease, &reports) {
                Verdict::Replace { takeover } => takeover,
                Verdict::Wait(left) => {
                    let waiting = FailoverCheck {
                        delay_left: Some(left),
                        ..unavailable()
                    };
                    return (waiting, None);
                }
            }
        }
        _ => None,
    };
    let waited = now.duration_since(since).as_secs_f64();
    let (mut check, note) = act_on(decision, target, approval.map(String::as_str), waited, now);
    if check.record.is_some() {
        check.lease_takeover = takeover;
    }
    (check, note)
}

fn unavailable() -> FailoverCheck {
    FailoverCheck {
        primary_available: Some(false),
        ..FailoverCheck::default()
    }
}

/// What the status last recorded of the failed primary and of the
/// synchronous standbys: a silent primary says nothing any more.
fn last_known<'a>(
    previous: &'a PostgresClusterStatus,
    valid: &ValidatedCluster,
    target: &'a str,
) -> failover::LastKnown<'a> {
    let last = previous.instances.iter().find(|i| i.name == target);
    let synchronous = valid.synchronous.as_ref().map(|sync| {
        failover::SyncSet::reported(
            sync,
            previous
                .instances
                .iter()
                .map(|i| (i.name.as_str(), i.sync_state.as_deref())),
        )
    });
    failover::LastKnown {
        primary: target,
        lsn: last.and_then(|i| i.lsn.as_deref()),
        timeline: last.and_then(|i| i.timeline),
        synchronous,
    }
}

/// Turns a failover decision into the check to record and the event.
fn act_on(
    decision: Decision,
    target: &str,
    approval: Option<&str>,
    waited: f64,
    now: Timestamp,
) -> (FailoverCheck, Option<Note>) {
    match decision {
        Decision::Promote {
            instance,
            lsn_gap_bytes,
            recovery_point,
        } => {
            if approval.is_some_and(|a| a != "true" && a != instance) {
                // The approval names another instance: do not guess.
                let blocked = FailoverCheck {
                    blocked: Some((instance, lsn_gap_bytes)),
                    ..unavailable()
                };
                return (blocked, None);
            }
            let reason = if approval.is_some() {
                APPROVED_FAILOVER
            } else {
                "Failover"
            };
            let note = Note::warning(
                reason,
                format!(
                    "primary {target} unavailable for {waited:.0} s: promoting {instance} (possible loss: {lsn_gap_bytes} bytes of WAL)"
                ),
            );
            let record = FailoverRecord {
                time: Time(now),
                from: target.to_owned(),
                to: instance,
                reason: reason.to_owned(),
                lsn_gap_bytes: i64::try_from(lsn_gap_bytes).unwrap_or(i64::MAX),
                recovery_point: Some(recovery_point),
                duration_seconds: Some(waited),
            };
            let promoting = FailoverCheck {
                record: Some(record),
                ..unavailable()
            };
            (promoting, Some(note))
        }
        Decision::Blocked {
            best,
            lsn_gap_bytes,
        } => {
            let blocked = FailoverCheck {
                blocked: Some((best, lsn_gap_bytes)),
                ..unavailable()
            };
            (blocked, None)
        }
        Decision::NoCandidate => (unavailable(), None),
    }
}

/// Acts on a `tusk.dev/promote` request for `requested` while `primary` is
/// the target (see [`switchover`]): the record of a switchover when the
/// cluster can switch over safely now, and the event saying what happens.
pub fn switchover(
    requested: &str,
    primary: &str,
    check: &FailoverCheck,
    reports: &BTreeMap<String, InstanceReport>,
    now: Timestamp,
) -> (Option<FailoverRecord>, Option<Note>) {
    let serving = check.primary_available == Some(true) && check.record.is_none();
    match switchover::evaluate(requested, primary, serving, reports) {
        Request::Start { to } => {
            let note = Note::normal(
                "Switchover",
                format!(
                    "switchover requested: {primary} shuts down cleanly, then {to} is promoted"
                ),
            );
            let record = FailoverRecord {
                time: Time(now),
                from: primary.to_owned(),
                to,
                reason: "Switchover".to_owned(),
                lsn_gap_bytes: 0,
                recovery_point: None,
                duration_seconds: None,
            };
            (Some(record), Some(note))
        }
        Request::Done => (None, None),
        Request::Refuse { reason } => {
            let note = Note::warning(
                "SwitchoverRefused",
                format!("switchover to {requested} refused: {reason}"),
            );
            (None, Some(note))
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
