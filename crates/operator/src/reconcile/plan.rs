//! Plan: every decision of one pass, made purely from the validated
//! cluster and what was observed, before anything is applied. Apply and
//! status only carry the plan out; nothing changes it afterwards.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tusk_api::contract::TlsSecret;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresCluster;

pub use backups::BackupDecisions;
use backups::protect_data;

use super::certificates::{self, Need};
use super::fetch::Observed;
use super::primary;
use super::roles::{RoleLabel, role_labels};
use super::rollout::{self as rolling, Outdated};
use super::storage::{OwnerChange, ownership, resizes};
use crate::children::{Children, named, pod_ready};
use crate::failover::FailoverCheck;
use crate::names::InstanceName;
use crate::note::Note;
use crate::plan::{InstancePlan, InstanceStep, ObservedInstance, plan_instances};
use crate::rollout::{Action, Rollout};
use crate::status::StatusInput;
use crate::validate::ValidatedCluster;

/// What one pass does.
pub struct Plan<'a> {
    /// The instance step, and the target primary after this pass.
    pub instances: InstancePlan,
    /// The role label of a pod created by the step: `primary` for a new
    /// cluster's first instance.
    pub new_pod_role: Option<&'static str>,
    /// Volumes to grow to the declared size.
    pub resizes: Vec<InstanceName>,
    /// Volumes whose owner reference changes with the deletion policy.
    pub owners: Vec<OwnerChange>,
    /// What was judged of the primary, and a failover or switchover decided.
    pub primary: FailoverCheck,
    /// Pods whose role label changes.
    pub roles: Vec<RoleLabel>,
    /// One-shot request annotations acted on, to remove.
    pub clear: Vec<&'static str>,
    /// Events for the decisions.
    pub events: Vec<Note>,
    /// The rolling update's decision.
    pub rollout: Rollout,
    /// Base backups: assignments, records, the schedule.
    pub backups: BackupDecisions,
    /// Restore rehearsals: start one, record and remove a finished one.
    pub rehearsal: crate::rehearsal::RehearsalPlan,
    /// The major upgrade's step.
    pub upgrade: crate::upgrade::UpgradePlan,
    /// What each certificate Secret needs: made, issued again, refused.
    pub certificates: Vec<(TlsSecret, Need)>,
    /// The status to write, given the apply outcome.
    pub status: StatusInput<'a>,
}

pub fn plan<'a>(
    cluster: &'a PostgresCluster,
    valid: &'a ValidatedCluster,
    observed: &'a Observed,
    outdated: &Outdated,
    now: Timestamp,
) -> Plan<'a> {
    let (mut step, latest_serial) = step_instances(cluster, valid, observed);
    let (mut check, mut events, mut clear) = move_primary(cluster, valid, observed, &step, now);
    let upgrade = decide_upgrade(cluster, valid, observed, now, &mut step, &mut check)
        .also_held(&mut events, &mut clear);
    let rollout = roll(
        cluster, valid, observed, outdated, &mut step, &mut check, now,
    );
    events.extend(rollout_note(&rollout, step.target_primary.as_str()));
    let new_pod_role = new_pod_role(observed, &step);
    let instances = retargeted(step, &check);
    let roles = roles(valid, observed, &instances);
    let (backups, rehearsal) = protect_data(
        cluster,
        valid,
        observed,
        &check,
        now,
        &mut events,
        &mut clear,
    );
    let status = StatusInput {
        declared: valid.instances,
        target_primary: Some(instances.target_primary.to_string()),
        latest_serial,
        unsupported: &valid.unsupported,
        primary_available: check.primary_available,
        failover_blocked: check.blocked.clone(),
        promotion_stalled: check.stalled.clone(),
        last_failover: check.record.clone(),
        lease_takeover: check.lease_takeover.clone(),
        rollout: rollout.status.clone(),
        postgres_version: Some(upgrade.data_version.unwrap_or(valid.version)),
        upgrade: upgrade.record.clone(),
        upgrading: upgrade.under_way,
        upgrade_condition: Some(upgrade.condition.clone()),
        archive: Some(valid.archive.clone()),
        backups: backups.progress(),
        rehearsal: rehearsal.record.clone(),
        rehearsal_condition: Some(super::rehearsal::condition(cluster, valid, &rehearsal, now)),
        backup_condition: Some(backups.freshness(cluster, valid, now)),
        ..StatusInput::unplanned(
            cluster,
            &observed.children.pods,
            observed.children.volume_count(),
            &observed.reports,
            Time(now),
        )
    };
    let certificates = certificates::needs(valid, &observed.children, now);
    events.extend(certificates::notes(valid, &certificates));
    Plan {
        certificates,
        new_pod_role,
        resizes: resizes(valid, &observed.children.volumes),
        owners: ownership(valid, &observed.children.volumes),
        instances,
        primary: check,
        roles,
        clear,
        events,
        rollout,
        backups,
        rehearsal,
        upgrade,
        status,
    }
}

/// The instance step with the target primary this pass leaves: the one a
/// failover or switchover it decided records, else the step's.
fn retargeted(step: InstancePlan, check: &FailoverCheck) -> InstancePlan {
    let target_primary = check.record.as_ref().map_or_else(
        || step.target_primary.clone(),
        |r| InstanceName::recorded(&r.to),
    );
    InstancePlan {
        target_primary,
        ..step
    }
}

/// The major upgrade's decision; while a step is under way, the instance
/// step and the primary's judgement are the upgrade's.
fn decide_upgrade(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    now: Timestamp,
    step: &mut InstancePlan,
    check: &mut FailoverCheck,
) -> crate::upgrade::UpgradePlan {
    let seen = super::upgrade::UpgradeObserved {
        children: &observed.children,
        reports: &observed.reports,
        pods: &observed.upgrade,
    };
    let upgrade = super::upgrade::decide(cluster, valid, &seen, check, &step.target_primary, now);
    if upgrade.holds_instances {
        hold_for_upgrade(step, check, observed, &upgrade);
    }
    upgrade
}

/// The instance step and primary judgement while an upgrade step is under
/// way: the primary's pod is created when the upgrade starts it, nothing
/// else; the primary counts as unavailable.
fn hold_for_upgrade(
    step: &mut InstancePlan,
    check: &mut FailoverCheck,
    observed: &Observed,
    upgrade: &crate::upgrade::UpgradePlan,
) {
    let primary = step.target_primary.clone();
    step.step = match upgrade.action {
        crate::upgrade::Action::StartPrimary => {
            if named(&observed.children.pods, primary.as_str()).is_some() {
                InstanceStep::WaitForReady(primary)
            } else {
                InstanceStep::RecreatePod(primary)
            }
        }
        _ => InstanceStep::Steady,
    };
    *check = FailoverCheck {
        primary_available: Some(false),
        ..FailoverCheck::default()
    };
}

/// The instance step of the pass, and the highest serial handed out once
/// it is applied.
fn step_instances(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
) -> (InstancePlan, u32) {
    let previous = cluster.status.as_ref();
    let recorded = previous.map_or(0, |s| u32::try_from(s.latest_instance_serial).unwrap_or(0));
    let instances = observe_instances(valid, &observed.children, observed.awaited.as_deref());
    let mut step = plan_instances(
        &valid.name,
        valid.instances,
        &instances,
        previous.and_then(|s| s.target_primary.as_deref()),
        recorded,
    );
    wait_for_termination(&mut step, &observed.children);
    // A paused cluster creates nothing, so it hands out no serial.
    let latest_serial = if valid.paused {
        instances.iter().map(|i| i.serial).fold(recorded, u32::max)
    } else {
        step.latest_serial
    };
    (step, latest_serial)
}

/// The role label of a pod the step creates: `primary` for a new
/// cluster's first instance, none otherwise (the role comes later).
fn new_pod_role(observed: &Observed, step: &InstancePlan) -> Option<&'static str> {
    (observed.children.pods.is_empty()
        && matches!(&step.step,
            InstanceStep::Create(i) | InstanceStep::RecreatePod(i) if *i == step.target_primary))
    .then_some(labels::role::PRIMARY)
}

/// The role label of each pod as the target primary makes it (none
/// changed while the cluster is paused).
fn roles(
    valid: &ValidatedCluster,
    observed: &Observed,
    instances: &InstancePlan,
) -> Vec<RoleLabel> {
    if valid.paused {
        return Vec::new();
    }
    role_labels(
        &observed.children.pods,
        &observed.reports,
        instances.target_primary.as_str(),
        observed.lease_quiet_since.is_some(),
    )
}

/// A pod still terminating is not re-created over: the new pod waits for
/// the old one to be gone (its spec cannot be changed in place).
fn wait_for_termination(step: &mut InstancePlan, children: &Children) {
    if let InstanceStep::RecreatePod(instance) = &step.step
        && named(&children.pods, instance.as_str()).is_some()
    {
        step.step = InstanceStep::WaitForReady(instance.clone());
    }
}

/// The rolling update's step, when nothing else moves: a pod to replace
/// becomes the instance step, a switchover the primary's move.
fn roll(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    outdated: &Outdated,
    step: &mut InstancePlan,
    check: &mut FailoverCheck,
    now: Timestamp,
) -> Rollout {
    let previous = cluster.status.as_ref();
    let primary = step.target_primary.to_string();
    let settled = step.step == InstanceStep::Steady
        && check.record.is_none()
        && check.primary_available == Some(true)
        && previous.is_some_and(|s| s.current_primary.as_deref() == Some(primary.as_str()))
        && !cluster.annotations().contains_key(labels::PROMOTE);
    let rollout = rolling::decide(cluster, valid, outdated, &primary, settled);
    match &rollout.action {
        Action::Wait => {}
        Action::Replace(instance) => {
            step.step = InstanceStep::ReplacePod(InstanceName::recorded(instance));
        }
        Action::Switchover(to) => {
            let (record, _) = primary::switchover(to, &primary, check, observed, now);
            if record.is_some() {
                check.record = record;
            }
        }
    }
    rollout
}

/// The event of a rollout's action.
fn rollout_note(rollout: &Rollout, primary: &str) -> Option<Note> {
    let reason = rollout.status.as_ref().map(|s| s.reason.as_str())?;
    let message = match &rollout.action {
        Action::Wait => return None,
        Action::Replace(instance) if instance == primary => {
            format!("restarting the primary {instance} in place on its volume ({reason})")
        }
        Action::Replace(instance) => {
            format!("replacing the pod of {instance} on its volume ({reason})")
        }
        Action::Switchover(to) => {
            format!("switching over from {primary} to the updated {to} ({reason})")
        }
    };
    Some(Note::normal("RollingUpdate", message))
}

/// The failover check, then a requested switchover: the primary's fate
/// in this pass, its events, and the request annotations it used up.
fn move_primary(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    step: &InstancePlan,
    now: Timestamp,
) -> (FailoverCheck, Vec<Note>, Vec<&'static str>) {
    if valid.paused {
        return (FailoverCheck::default(), Vec::new(), Vec::new());
    }
    let (mut check, mut events) = primary::judge(cluster, valid, observed, now);
    if restart_in_place(cluster, valid, &step.target_primary, now) && check.record.is_some() {
        // The rollout restarts this primary on purpose, as the owner chose
        // (`primaryUpdateMethod: restart`): no failover while it comes back.
        check = FailoverCheck {
            primary_available: Some(false),
            delay_left: Some(std::time::Duration::from_secs(1)),
            ..FailoverCheck::default()
        };
        events.clear();
    }
    let mut clear = Vec::new();
    if let Some(requested) = cluster.annotations().get(labels::PROMOTE) {
        let primary = check
            .record
            .as_ref()
            .map_or_else(|| step.target_primary.to_string(), |r| r.to.clone());
        let (record, note) = primary::switchover(requested, &primary, &check, observed, now);
        if record.is_some() {
            check.record = record;
        }
        events.extend(note);
        clear.push(labels::PROMOTE);
    }
    if check.clear_approval {
        clear.push(labels::APPROVE_DATA_LOSS);
    }
    (check, events, clear)
}

/// Whether the rolling update restarts the primary `target` in place and
/// the restart is still within `spec.failover.promotionTimeoutSeconds` of
/// the primary turning unavailable; past that, a failover replaces it as
/// it would any failed primary.
fn restart_in_place(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    target: &InstanceName,
    now: Timestamp,
) -> bool {
    let Some(status) = cluster.status.as_ref() else {
        return false;
    };
    if !crate::rollout::restarting(status.rollout.as_ref(), target.as_str()) {
        return false;
    }
    let down_since = tusk_api::conditions::find_condition(
        &status.conditions,
        tusk_api::conditions::PRIMARY_AVAILABLE,
    )
    .filter(|c| c.status == "False")
    .map(|c| c.last_transition_time.0);
    let limit = i64::from(valid.failover.promotion_timeout_seconds.max(1));
    down_since.is_none_or(|since| now.as_second() - since.as_second() < limit)
}

/// Each instance of the cluster as its pod and volume show it, and the
/// instance an earlier pass created that the caches do not show yet
/// (`awaited`), as one that exists and is not ready: it is waited for,
/// never counted missing and created again (see [`crate::expectations`]).
fn observe_instances(
    valid: &ValidatedCluster,
    children: &Children,
    awaited: Option<&str>,
) -> Vec<ObservedInstance> {
    let mut observed: Vec<ObservedInstance> = Vec::new();
    let names = children
        .pods
        .iter()
        .map(|p| p.name_any())
        .chain(children.volumes.iter().map(|v| v.name_any()));
    for name in names {
        let Some(serial) = valid.name.serial_of(&name) else {
            continue;
        };
        if observed.iter().any(|o| o.serial == serial) {
            continue;
        }
        let pod = named(&children.pods, &name).filter(|p| p.metadata.deletion_timestamp.is_none());
        observed.push(ObservedInstance {
            name: valid.name.instance(serial),
            serial,
            has_pod: pod.is_some(),
            has_volume: named(&children.volumes, &name).is_some(),
            ready: pod.is_some_and(pod_ready),
        });
    }
    if let Some(serial) = awaited.and_then(|name| valid.name.serial_of(name)) {
        observed.retain(|o| o.serial != serial);
        observed.push(ObservedInstance {
            name: valid.name.instance(serial),
            serial,
            has_pod: true,
            has_volume: true,
            ready: false,
        });
    }
    observed.sort_by_key(|o| o.serial);
    observed
}

mod backups;
#[cfg(test)]
mod tests;
