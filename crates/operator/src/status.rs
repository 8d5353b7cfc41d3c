//! Status is computed last, from observations (`CONTRIBUTING.md`, 7), and
//! written only when it changed (R9): a converged reconcile makes no
//! status write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::ResourceExt;
use tusk_api::conditions::{self, ConditionStatus, DesiredCondition, set_condition};
use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::labels;
use tusk_api::v1alpha1::{
    BlockedFailover, ClusterPhase, FailoverStatus, InstanceStatus, PostgresCluster,
    PostgresClusterStatus, RolloutStatus,
};

use crate::phase::{Observation, assess};

/// How often an otherwise unchanged status is rewritten to refresh
/// `lastReconcileTime` (a heartbeat, not a change).
pub const HEARTBEAT_SECONDS: i64 = 300;

/// Everything the status step needs.
#[derive(Clone)]
pub struct StatusInput<'a> {
    pub previous: Option<&'a PostgresClusterStatus>,
    pub generation: Option<i64>,
    pub declared: u32,
    pub pods: &'a [Pod],
    pub volumes: u32,
    pub reports: &'a BTreeMap<String, InstanceReport>,
    pub target_primary: Option<String>,
    pub latest_serial: u32,
    pub deleting: bool,
    pub failure: Option<(crate::error::ErrorCategory, String)>,
    /// Declared features not acted on (R30).
    pub unsupported: &'a [String],
    /// Whether the primary serves (`None`: not judged this time).
    pub primary_available: Option<bool>,
    /// A failover the declared durability forbids, waiting for approval.
    pub failover_blocked: Option<BlockedFailover>,
    /// A promotion that did not complete in time, with nothing to choose
    /// instead: why.
    pub promotion_stalled: Option<String>,
    /// A failover decided in this reconcile.
    pub last_failover: Option<tusk_api::v1alpha1::FailoverRecord>,
    /// The primary lease version the new primary of that failover takes
    /// over.
    pub lease_takeover: Option<String>,
    /// The rolling update under way, if any.
    pub rollout: Option<RolloutStatus>,
    /// The major version the instances' data runs.
    pub postgres_version: Option<u32>,
    /// Where WAL is archived (`Some(None)`: nowhere); `None` when the
    /// pass did not judge it (the last observation stands).
    pub archive: Option<Option<crate::archiving::ArchiveTarget>>,
    /// Base backups' progress (`None`: not judged; the last record stands).
    pub backups: Option<BackupProgress>,
    /// A restore rehearsal that finished in this pass.
    pub rehearsal: Option<tusk_api::v1alpha1::RestoreVerification>,
    /// The `RestoreRehearsed` condition while rehearsals are declared,
    /// `Some(None)` when they are not (removed); `None` when the pass did
    /// not judge it (kept).
    pub rehearsal_condition: Option<Option<Judgement>>,
    /// The `LastBackupRecent` condition while a backup schedule is
    /// declared; as `rehearsal_condition`.
    pub backup_condition: Option<Option<Judgement>>,
    /// The major upgrade's record after this pass (`None`: as it was).
    pub upgrade: Option<tusk_api::v1alpha1::UpgradeStatus>,
    /// A major upgrade step is under way: the phase is Upgrading.
    pub upgrading: bool,
    /// The `MajorUpgrade` condition: `Some(None)` removes it, `None`
    /// leaves it as it was.
    pub upgrade_condition: Option<Option<Judgement>>,
    /// The spec this pass found valid, to record as the last valid one
    /// (`None`: the record stays as it is).
    pub valid_spec: Option<tusk_api::v1alpha1::LastValidSpec>,
    pub now: Time,
}

/// A condition as judged: status, reason, message.
pub type Judgement = (ConditionStatus, &'static str, String);

/// What a pass decided of base backups, for `status.backup`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BackupProgress {
    /// `running` after the pass.
    pub running: Option<tusk_api::v1alpha1::BackupAssignment>,
    /// A backup that completed: its id and when.
    pub completed: Option<(String, Time)>,
    /// The schedule's slot whose PostgresBackup now exists.
    pub scheduled: Option<Time>,
}

impl<'a> StatusInput<'a> {
    /// The status of a pass that decided nothing (the spec failed
    /// validation, or a deletion waits for its cleanup): what was observed,
    /// with the recorded primary and serials kept, so the last known
    /// positions a failover needs survive an invalid edit.
    pub fn unplanned(
        cluster: &'a PostgresCluster,
        pods: &'a [Pod],
        volumes: u32,
        reports: &'a BTreeMap<String, InstanceReport>,
        now: Time,
    ) -> Self {
        let previous = cluster.status.as_ref();
        Self {
            previous,
            generation: cluster.metadata.generation,
            declared: u32::try_from(cluster.spec.instances).unwrap_or(0),
            pods,
            volumes,
            reports,
            target_primary: previous.and_then(|s| s.target_primary.clone()),
            latest_serial: previous
                .map_or(0, |s| u32::try_from(s.latest_instance_serial).unwrap_or(0)),
            deleting: cluster.metadata.deletion_timestamp.is_some(),
            failure: None,
            unsupported: &[],
            primary_available: None,
            failover_blocked: None,
            promotion_stalled: None,
            last_failover: None,
            lease_takeover: None,
            rollout: previous.and_then(|s| s.rollout.clone()),
            postgres_version: previous
                .and_then(|s| s.postgres_version)
                .and_then(|v| u32::try_from(v).ok()),
            archive: None,
            backups: None,
            rehearsal: None,
            rehearsal_condition: None,
            backup_condition: None,
            upgrade: None,
            upgrading: false,
            upgrade_condition: None,
            valid_spec: None,
            now,
        }
    }
}

/// The new status.
pub fn compose(input: &StatusInput<'_>) -> PostgresClusterStatus {
    let previous = input.previous.cloned().unwrap_or_default();
    let instances = instances(input, &previous);
    let ready = u32::try_from(instances.iter().filter(|i| i.ready).count()).unwrap_or(u32::MAX);
    let existing = u32::try_from(input.pods.len())
        .unwrap_or(u32::MAX)
        .max(input.volumes);
    // The target once it reports as primary. A primary that stops
    // answering stays current until another is promoted: the failover
    // check judges the current primary, and must keep judging it.
    let current_primary = instances
        .iter()
        .find(|i| {
            i.reported_role() == Some(InstanceRole::Primary)
                && Some(&i.name) == input.target_primary.as_ref()
        })
        .map(|i| i.name.clone())
        .or_else(|| {
            previous
                .current_primary
                .clone()
                .filter(|p| Some(p) == input.target_primary.as_ref())
        });
    // Provisioned once it was Ready; a failover or switchover happens only
    // after that, and while one is under way the current primary is unset
    // (a Degraded status without one would otherwise read as a first
    // bootstrap, and the phase go back to Provisioning).
    let provisioned = matches!(
        previous.phase,
        Some(ClusterPhase::Ready | ClusterPhase::Scaling | ClusterPhase::Upgrading)
    ) || (previous.phase == Some(ClusterPhase::Degraded)
        && previous.current_primary.is_some())
        || previous.last_failover.is_some();
    let assessment = assess(&Observation {
        deleting: input.deleting,
        failure: input.failure.clone(),
        declared: input.declared,
        existing,
        ready,
        provisioned,
        rollout: input.rollout.as_ref().map(rollout_message),
    });
    let mut status = PostgresClusterStatus {
        phase: Some(assessment.phase),
        conditions: previous.conditions.clone(),
        observed_generation: input.generation,
        instances,
        ready_instances: i32::try_from(ready).unwrap_or(i32::MAX),
        current_primary,
        target_primary: input.target_primary.clone(),
        latest_instance_serial: i32::try_from(input.latest_serial).unwrap_or(i32::MAX),
        rollout: input.rollout.clone(),
        postgres_version: input.postgres_version.and_then(|v| i32::try_from(v).ok()),
        last_reconcile_time: previous.last_reconcile_time.clone(),
        ..previous
    };
    set_assessed(&mut status, &assessment, input);
    set_primary_available(&mut status, input);
    set_failover_blocked(&mut status, input);
    status.failover = input
        .failover_blocked
        .clone()
        .map(|blocked| FailoverStatus {
            blocked: Some(blocked),
        });
    set_last_failover(&mut status, input, previous.current_primary.as_deref());
    set_unsupported(&mut status, input);
    backups::set_archiving(&mut status, input);
    backups::set_backups(&mut status, input);
    backups::set_rehearsed(&mut status, input);
    set_upgrade(&mut status, input);
    roles::set_roles(&mut status, input);
    if let Some(record) = &input.valid_spec {
        status.last_valid_spec = Some(record.clone());
    }
    status
}

/// The major upgrade's record and condition; the phase is Upgrading while
/// one is under way.
fn set_upgrade(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    if let Some(record) = &input.upgrade {
        status.upgrade = Some(record.clone());
    }
    if input.upgrading && !input.deleting {
        status.phase = Some(ClusterPhase::Upgrading);
    }
    backups::set_judged(
        status,
        conditions::MAJOR_UPGRADE,
        &input.upgrade_condition,
        input,
    );
}

/// The failover record: a decision this reconcile made, as it made it, or
/// the previous one completed once its target serves.
fn set_last_failover(
    status: &mut PostgresClusterStatus,
    input: &StatusInput<'_>,
    previous_primary: Option<&str>,
) {
    if let Some(record) = &input.last_failover {
        status.last_failover = Some(record.clone());
        status
            .primary_lease_takeover
            .clone_from(&input.lease_takeover);
    } else if let Some(record) = status.last_failover.as_mut() {
        promoted(
            record,
            previous_primary,
            status.current_primary.as_deref(),
            &input.now,
        );
    }
}

/// What the Progressing condition says of a rolling update.
fn rollout_message(rollout: &RolloutStatus) -> String {
    let instance = rollout
        .instance
        .as_deref()
        .map_or_else(String::new, |i| format!(" {i}"));
    format!(
        "rolling update ({}): {}{instance}; outdated: {}",
        rollout.reason,
        rollout.step,
        rollout.outdated.join(", ")
    )
}

/// Each pod's instance, from its report or, while it is silent, from what
/// it last reported.
fn instances(input: &StatusInput<'_>, previous: &PostgresClusterStatus) -> Vec<InstanceStatus> {
    let primary_report = input
        .target_primary
        .as_ref()
        .and_then(|name| input.reports.get(name))
        // A primary just restarted lists no standby until they reconnect;
        // it acknowledges nothing meanwhile, so the last set still holds.
        .filter(|r| r.role == InstanceRole::Primary && !r.standbys.is_empty());
    input
        .pods
        .iter()
        .map(|pod| {
            let before = previous.instances.iter().find(|i| i.name == pod.name_any());
            instance_status(pod, input.reports, before, primary_report, &input.now)
        })
        .collect()
}

fn set(
    status: &mut PostgresClusterStatus,
    condition: &DesiredCondition<'_>,
    input: &StatusInput<'_>,
) {
    set_condition(
        &mut status.conditions,
        condition,
        input.generation,
        &input.now,
    );
}

/// Ready, Progressing and Degraded as assessed.
fn set_assessed(
    status: &mut PostgresClusterStatus,
    assessment: &crate::phase::Assessment,
    input: &StatusInput<'_>,
) {
    let (unplaced, mut waiting) = crate::scheduling::waiting(status);
    waiting.extend(waiting_reasons(input.pods, input.reports));
    // A failure's category, or the deletion, says more than a wait.
    let unplaced = unplaced.filter(|_| input.failure.is_none() && !input.deleting);
    for condition in assessment.conditions() {
        // Say why instances are not ready, so `kubectl describe` alone
        // explains a cluster that does not converge (R22).
        let not_ready =
            condition.type_ == conditions::READY && condition.status == ConditionStatus::False;
        let message = if not_ready && !waiting.is_empty() {
            format!("{}; {}", condition.message, waiting.join("; "))
        } else {
            condition.message.to_owned()
        };
        let reason = match unplaced {
            Some(reason) if not_ready => reason.as_str(),
            _ => condition.reason,
        };
        let condition = DesiredCondition {
            message: &message,
            reason,
            ..condition
        };
        set(status, &condition, input);
    }
}

fn set_primary_available(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    if let Some(record) = &input.last_failover {
        // A new primary: its availability is judged afresh once it serves,
        // so the former primary's outage does not count against it.
        let mut message = format!("promoting {}", record.to);
        if !record.abandoned.is_empty() {
            message.push_str(&format!(
                " (abandoned, not serving in time: {})",
                record.abandoned.join(", ")
            ));
        }
        let promoting = DesiredCondition {
            type_: tusk_api::conditions::PRIMARY_AVAILABLE,
            status: ConditionStatus::Unknown,
            reason: "Promoting",
            message: &message,
        };
        set(status, &promoting, input);
    } else if let Some(why) = &input.promotion_stalled {
        let stalled = DesiredCondition {
            type_: tusk_api::conditions::PRIMARY_AVAILABLE,
            status: ConditionStatus::Unknown,
            reason: "PromotionStalled",
            message: why,
        };
        set(status, &stalled, input);
    } else if let Some(available) = input.primary_available {
        let (reason, message) = if available {
            ("Serving", String::new())
        } else {
            (
                "PrimaryUnavailable",
                format!(
                    "the primary {} is not ready or does not answer",
                    input.target_primary.clone().unwrap_or_default()
                ),
            )
        };
        let judged = DesiredCondition {
            type_: tusk_api::conditions::PRIMARY_AVAILABLE,
            status: available.into(),
            reason,
            message: &message,
        };
        set(status, &judged, input);
    }
}

fn set_failover_blocked(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    let message = input.failover_blocked.as_ref().map(blocked_message);
    let type_ = conditions::FAILOVER_BLOCKED;
    set_true_or_remove(status, type_, "DurabilityAtRisk", message, input);
}

/// What is blocked, and exactly what an approval must say.
fn blocked_message(blocked: &BlockedFailover) -> String {
    let key = labels::APPROVE_DATA_LOSS;
    let BlockedFailover { id, from, to, .. } = blocked;
    let mut message = format!(
        "promoting {to} in place of {from} could lose up to {gap} bytes of acknowledged WAL, \
         which dataDurability: required forbids; to approve this decision ({id}): \
         tusk promote <cluster> {to} --accept-data-loss, or kubectl annotate pgc <cluster> {key}={id}",
        gap = blocked.lsn_gap_bytes,
    );
    if let Some(value) = &blocked.rejected_approval {
        message.push_str(&format!(
            "; the approval {key}={value:?} approved nothing: it must say {id}"
        ));
    }
    message
}

fn set_unsupported(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    let message = (!input.unsupported.is_empty()).then(|| {
        format!(
            "not supported by this operator version yet: {}",
            input.unsupported.join("; ")
        )
    });
    let type_ = conditions::UNSUPPORTED;
    set_true_or_remove(status, type_, "FeatureNotSupported", message, input);
}

/// Sets condition `type_` True, saying `message`, or removes it when
/// there is nothing to say.
fn set_true_or_remove(
    status: &mut PostgresClusterStatus,
    type_: &str,
    reason: &str,
    message: Option<String>,
    input: &StatusInput<'_>,
) {
    let Some(message) = message else {
        conditions::remove_condition(&mut status.conditions, type_);
        return;
    };
    let condition = DesiredCondition {
        type_,
        status: ConditionStatus::True,
        reason,
        message: &message,
    };
    set(status, &condition, input);
}

/// The moment the chosen instance first reports as the current primary,
/// the record's time becomes the promotion's, and its duration runs from
/// the failure (or the request) to it.
fn promoted(
    record: &mut tusk_api::v1alpha1::FailoverRecord,
    before: Option<&str>,
    now_primary: Option<&str>,
    now: &Time,
) {
    if now_primary != Some(record.to.as_str()) || before == now_primary {
        return;
    }
    let decision_to_promotion = now.0.duration_since(record.time.0).as_secs_f64();
    record.duration_seconds =
        Some(record.duration_seconds.unwrap_or(0.0) + decision_to_promotion.max(0.0));
    record.time = MicroTime(now.0);
}

/// The failover or switchover record that chose the current target
/// primary, if the target was chosen by one (a first primary was not).
pub fn choice_of_target(
    status: &PostgresClusterStatus,
) -> Option<&tusk_api::v1alpha1::FailoverRecord> {
    status
        .last_failover
        .as_ref()
        .filter(|record| status.target_primary.as_ref() == Some(&record.to))
}

/// A failover or switchover chose the target primary and it does not
/// serve yet. (`currentPrimary` is empty meanwhile, so the previous status
/// cannot tell; a first primary still bootstrapping has no record.)
pub fn promotion_under_way(status: &PostgresClusterStatus) -> bool {
    status.current_primary != status.target_primary && choice_of_target(status).is_some()
}

/// Whether `new` must be written over `old`: it changed, or the heartbeat
/// is due. Returns the status to write, with `lastReconcileTime` set.
pub fn to_write(
    old: Option<&PostgresClusterStatus>,
    mut new: PostgresClusterStatus,
    now: &Time,
) -> Option<PostgresClusterStatus> {
    let heartbeat_due = new
        .last_reconcile_time
        .as_ref()
        .is_none_or(|t| now.0.as_second() - t.0.as_second() >= HEARTBEAT_SECONDS);
    if old == Some(&new) && !heartbeat_due {
        return None;
    }
    new.last_reconcile_time = Some(now.clone());
    Some(new)
}

/// `<pod>: <reason>: <message>` for every container that is waiting or
/// has failed, as the kubelet reports it, and every instance manager that
/// reports an error it keeps retrying.
fn waiting_reasons(pods: &[Pod], reports: &BTreeMap<String, InstanceReport>) -> Vec<String> {
    let mut reasons = Vec::new();
    for pod in pods {
        if let Some(error) = reports
            .get(&pod.name_any())
            .and_then(|r| r.last_error.as_ref())
        {
            reasons.push(format!("{}: {error}", pod.name_any()));
        }
        let statuses = pod.status.as_ref().into_iter().flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        });
        for container in statuses {
            let state = container.state.as_ref();
            let (reason, message) = if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
                (waiting.reason.clone(), waiting.message.clone())
            } else if let Some(done) = state
                .and_then(|s| s.terminated.as_ref())
                .filter(|t| t.exit_code != 0)
            {
                (done.reason.clone(), done.message.clone())
            } else {
                continue;
            };
            let reason = reason.unwrap_or_else(|| "Waiting".to_owned());
            if reason == "PodInitializing" || reason == "ContainerCreating" {
                continue;
            }
            reasons.push(match message {
                Some(message) if !message.is_empty() => {
                    format!("{}: {reason}: {message}", pod.name_any())
                }
                _ => format!("{}: {reason}", pod.name_any()),
            });
        }
    }
    reasons
}

/// One instance's status from its report, and whether its pod waits for
/// a node. What a silent instance or a silent primary can no longer say (position, timeline, synchronous
/// state) is kept from `before`: the last known values are what a failover
/// decides on.
fn instance_status(
    pod: &Pod,
    reports: &BTreeMap<String, InstanceReport>,
    before: Option<&InstanceStatus>,
    primary: Option<&InstanceReport>,
    now: &Time,
) -> InstanceStatus {
    let name = pod.name_any();
    let unscheduled = crate::scheduling::unscheduled(pod, now.0);
    let pod_ready = crate::children::pod_ready(pod);
    let (sync_state, flush_lsn) = match primary {
        Some(primary) => {
            let listed = primary.standbys.iter().find(|s| s.name == name);
            (
                listed.map(|s| s.sync_state.clone()),
                listed.and_then(|s| s.flush_lsn.clone()),
            )
        }
        None => (
            before.and_then(|b| b.sync_state.clone()),
            before.and_then(|b| b.flush_lsn.clone()),
        ),
    };
    match reports.get(&name) {
        Some(report) => InstanceStatus {
            role: report.role.as_str().to_owned(),
            ready: pod_ready && report.ready,
            timeline: report
                .timeline
                .map(i64::from)
                .or_else(|| before.and_then(|b| b.timeline)),
            lsn: report
                .current_lsn
                .clone()
                .or_else(|| report.replayed_lsn.clone())
                .or_else(|| before.and_then(|b| b.lsn.clone())),
            lag_bytes: report.lag_bytes.and_then(|b| i64::try_from(b).ok()),
            sync_state,
            flush_lsn,
            kept_copy: report.kept_copy.clone(),
            kept_wal: report.kept_wal.clone(),
            unscheduled,
            name,
        },
        None => InstanceStatus {
            name,
            role: InstanceStatus::UNKNOWN_ROLE.to_owned(),
            ready: false,
            timeline: before.and_then(|b| b.timeline),
            lsn: before.and_then(|b| b.lsn.clone()),
            sync_state,
            flush_lsn,
            lag_bytes: None,
            kept_copy: before.and_then(|b| b.kept_copy.clone()),
            kept_wal: before.and_then(|b| b.kept_wal.clone()),
            unscheduled,
        },
    }
}

mod backups;
mod roles;
#[cfg(test)]
mod tests;
