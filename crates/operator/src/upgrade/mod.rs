//! Major-version upgrades (R27) as a state machine recorded in
//! `status.upgrade`, each step with the time it began. Pure: the
//! reconcile's plan feeds it what was observed; apply stops the instances,
//! creates or removes the upgrade pod and the replicas' old volumes.
//!
//! An upgrade starts when `spec.postgres.version` names a newer major than
//! the data's (`status.postgresVersion`; admission already required
//! `spec.upgrade.approvedVersion` to equal it), the primary serves, and a
//! base backup completed within `spec.upgrade.backupMaxAgeHours`, or the
//! [`labels::UPGRADE_WITHOUT_BACKUP`] annotation names this version (the
//! override is recorded). Then:
//!
//! 0. `PreChecking`, when the cluster has a backup to restore: a pod of
//!    the upgrade pod's shape, on a scratch volume of its own, restores
//!    the newest backup and runs `pg_upgrade --check` on that copy (see
//!    [`tusk_api::upgrade`]) while every instance serves. A failure ends
//!    the upgrade `Failed` with nothing stopped; a pass goes on once the
//!    primary serves (failover and rolling updates are not held meanwhile:
//!    a restore of a large database takes a while). Without a backup (the
//!    override), the check runs only in step 2, after writes stopped.
//! 1. `StoppingInstances`: every instance pod is deleted; writes stop with
//!    the primary (its manager shuts PostgreSQL down cleanly).
//! 2. `Upgrading`: the upgrade pod (see [`tusk_api::upgrade`]) runs
//!    `pg_upgrade --check` and `--link` on the primary's volume. A failure
//!    before the link, or of the link itself, leaves the old cluster as it
//!    was (the rollback point): the upgrade is `Failed`, the instances start
//!    again with the old major, and it is tried again only after the spec
//!    changes.
//! 3. `StartingPrimary`: the primary's pod runs the new major (its manager
//!    gathers planner statistics in stages once it serves).
//! 4. `RecloningReplicas`: the replicas' volumes, which hold the old
//!    major's data, are removed (or released, with `deletionPolicy:
//!    Retain`); new replicas are cloned from the upgraded primary by the
//!    usual scale-up, one at a time.
//! 5. `Completed`.
//!
//! Every step is decided from status and what exists, so an operator
//! restarted in the middle carries on where the record says; while a step
//! is under way, failover, rolling updates and scaling are held.

mod precheck;
#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tusk_api::conditions::ConditionStatus;
use tusk_api::time::kube_time;
use tusk_api::upgrade::Outcome;
use tusk_api::v1alpha1::{UpgradeStatus, UpgradeStepRecord};

use crate::note::Note;
use crate::rehearsal::Observed;
use crate::status::Judgement;

pub const WAITING_FOR_BACKUP: &str = "WaitingForBackup";
pub const PRE_CHECKING: &str = "PreChecking";
pub const STOPPING_INSTANCES: &str = "StoppingInstances";
pub const UPGRADING: &str = "Upgrading";
pub const STARTING_PRIMARY: &str = "StartingPrimary";
pub const RECLONING_REPLICAS: &str = "RecloningReplicas";
pub const COMPLETED: &str = "Completed";
pub const FAILED: &str = "Failed";

/// The steps during which the upgrade, not the usual reconcile, decides
/// what runs.
const UNDER_WAY: [&str; 4] = [
    STOPPING_INSTANCES,
    UPGRADING,
    STARTING_PRIMARY,
    RECLONING_REPLICAS,
];

/// How often a step under way is looked at (the upgrade pod is not
/// watched, and pods that go away end a step).
const POLL: Duration = Duration::from_secs(2);

/// How often the running upgrade pod is read: its end is the next step's
/// start, and writes are stopped meanwhile.
const POD_POLL: Duration = Duration::from_millis(500);

/// The longest the upgrade pod may run before it is failed and removed (a
/// pod that cannot be scheduled, a `pg_upgrade` that hangs).
pub const TIMEOUT: SignedDuration = SignedDuration::from_hours(6);

/// What a pass observed for the upgrade.
pub struct UpgradeInput<'a> {
    /// The major of the cluster's data (`status.postgresVersion`).
    pub running: u32,
    /// The declared major (`spec.postgres.version`).
    pub declared: u32,
    pub recorded: Option<&'a UpgradeStatus>,
    /// The cluster's generation.
    pub generation: Option<i64>,
    pub paused: bool,
    /// The target primary: the instance whose volume is upgraded.
    pub primary: &'a str,
    /// The primary serves (available, recorded current, no failover).
    pub primary_serving: bool,
    /// The primary's pod is ready and reports this major.
    pub primary_major: Option<u32>,
    /// Instance pods that exist, terminating or not.
    pub pods: &'a [String],
    /// Volumes of the instances other than the primary.
    pub replica_volumes: &'a [String],
    /// The upgrade pod.
    pub pod: Option<&'a Observed>,
    /// The pre-check pod (or its scratch volume).
    pub check: Option<&'a Observed>,
    /// The cluster archives to a repository its newest backup can be
    /// restored from (the pre-check's source).
    pub restorable: bool,
    /// When the newest base backup completed.
    pub last_backup: Option<Timestamp>,
    pub backup_max_age_hours: i32,
    /// The override annotation's value.
    pub backup_override: Option<&'a str>,
    pub now: Timestamp,
}

/// What apply does for the upgrade in this pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Action {
    #[default]
    None,
    /// Delete every instance pod.
    StopInstances,
    /// Create the upgrade pod on the primary's volume.
    CreatePod,
    /// Delete the upgrade pod (its outcome is recorded).
    RemovePod,
    /// Create the primary's pod (with the new major).
    StartPrimary,
    /// Remove the replicas' volumes, which hold the old major's data.
    RemoveReplicaVolumes,
}

/// What apply does with the pre-check pod and its scratch volume.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckAction {
    #[default]
    None,
    /// Create the scratch volume and the pod.
    Create,
    /// Delete the pod and its scratch volume.
    Remove,
}

/// The pass's upgrade decisions.
#[derive(Debug, Default, PartialEq)]
pub struct UpgradePlan {
    /// `status.upgrade` after this pass (`None`: as it was).
    pub record: Option<UpgradeStatus>,
    pub action: Action,
    pub check: CheckAction,
    /// The upgrade decides what instances run; failover, rolling updates
    /// and scaling wait.
    pub holds_instances: bool,
    /// The data's major once this pass is applied.
    pub data_version: Option<u32>,
    pub events: Vec<Note>,
    pub look_again: Option<Duration>,
    /// A step is under way after this pass (the cluster's phase is
    /// Upgrading).
    pub under_way: bool,
    /// The `MajorUpgrade` condition (`None`: no upgrade declared or on
    /// record, the condition is removed).
    pub condition: Option<Judgement>,
}

pub fn decide(input: &UpgradeInput<'_>) -> UpgradePlan {
    let recorded = input
        .recorded
        .filter(|r| u32::try_from(r.to_version).ok() == Some(input.declared));
    let mut plan = match recorded {
        Some(record) if UNDER_WAY.contains(&record.step.as_str()) => continue_step(input, record),
        Some(record) if record.step == PRE_CHECKING => precheck::continue_check(input, record),
        Some(record) if record.step == FAILED => failed(input, record),
        _ if input.declared > input.running => start(input, recorded),
        _ => precheck::abandoned(input),
    };
    let record = plan.record.as_ref().or(recorded).or(input.recorded);
    let checking = record.is_some_and(|r| r.step == PRE_CHECKING);
    if input.check.is_some() && !checking && plan.check == CheckAction::None {
        plan.check = CheckAction::Remove;
    }
    if plan.condition.is_none() {
        plan.condition = condition(record, input.running);
    }
    plan.under_way = under_way(record);
    plan
}

/// The condition a record gives once no step is under way.
fn condition(record: Option<&UpgradeStatus>, running: u32) -> Option<Judgement> {
    let record = record?;
    match record.step.as_str() {
        COMPLETED if u32::try_from(record.to_version).ok() == Some(running) => Some((
            ConditionStatus::True,
            "Completed",
            format!(
                "upgraded from PostgreSQL {} to {}",
                record.from_version, record.to_version
            ),
        )),
        FAILED => Some((
            ConditionStatus::False,
            "Failed",
            record.message.clone().unwrap_or_default(),
        )),
        WAITING_FOR_BACKUP => Some((
            ConditionStatus::False,
            "NoRecentBackup",
            record.message.clone().unwrap_or_default(),
        )),
        PRE_CHECKING => Some((
            ConditionStatus::Unknown,
            "PreChecking",
            record.message.clone().unwrap_or_default(),
        )),
        step if UNDER_WAY.contains(&step) => Some((
            ConditionStatus::Unknown,
            "InProgress",
            format!("{step}: {}", record.message.clone().unwrap_or_default()),
        )),
        _ => None,
    }
}

/// A declared newer major with no upgrade under way: start one, or say
/// what it waits for.
fn start(input: &UpgradeInput<'_>, recorded: Option<&UpgradeStatus>) -> UpgradePlan {
    let mut plan = UpgradePlan::default();
    if input.paused {
        return plan;
    }
    let to = input.declared;
    let max_age = SignedDuration::from_hours(i64::from(input.backup_max_age_hours.max(1)));
    let fresh = input
        .last_backup
        .is_some_and(|at| input.now.duration_since(at) <= max_age);
    let overridden = input.backup_override.map(str::trim) == Some(to.to_string().as_str());
    if !fresh && !overridden {
        let newest = input
            .last_backup
            .map_or_else(|| "none".to_owned(), |at| at.to_string());
        let message = format!(
            "no base backup completed in the last {}h (spec.upgrade.backupMaxAgeHours; newest: \
             {newest}): take one (a PostgresBackup), or annotate the cluster {}=\"{to}\" to \
             upgrade without",
            max_age.as_hours(),
            tusk_api::labels::UPGRADE_WITHOUT_BACKUP
        );
        let first = recorded.is_none_or(|r| r.step != WAITING_FOR_BACKUP);
        if first {
            plan.events.push(Note::warning(
                "MajorUpgradeWaiting",
                format!("upgrade to PostgreSQL {to} not started: {message}"),
            ));
        }
        let mut record = new_record(input, recorded, WAITING_FOR_BACKUP);
        record.message = Some(message);
        plan.record = Some(record);
        return plan;
    }
    if input.restorable && input.last_backup.is_some() {
        return precheck::start(input);
    }
    let without = "no backup to restore for a pre-check: pg_upgrade --check runs after they \
                   stop"
        .to_owned();
    let mut record = new_record(input, None, STOPPING_INSTANCES);
    if !fresh {
        record.backup_override = Some(format!(
            "started without a recent backup: {}=\"{to}\"",
            tusk_api::labels::UPGRADE_WITHOUT_BACKUP
        ));
    }
    stop_instances(input, record, without)
}

/// Moves `record` to `StoppingInstances` once the primary serves (`checked`
/// says what was checked before), or waits.
fn stop_instances(
    input: &UpgradeInput<'_>,
    mut record: UpgradeStatus,
    checked: String,
) -> UpgradePlan {
    let mut plan = UpgradePlan::default();
    if !input.primary_serving {
        // Never during a failover or while the primary is down: the
        // upgrade starts from a primary that serves.
        plan.look_again = Some(POLL);
        return plan;
    }
    let to = input.declared;
    enter(&mut record, STOPPING_INSTANCES, input.now);
    if record.started_at.is_none() {
        record.started_at = Some(kube_time(input.now));
    }
    record.primary = Some(input.primary.to_owned());
    record.generation = input.generation;
    record.message = Some(format!(
        "stopping every instance: writes are fenced ({checked})"
    ));
    plan.events.push(Note::normal(
        "MajorUpgradeStarted",
        format!(
            "upgrading from PostgreSQL {} to {to} on the volume of {}: stopping every instance \
             ({checked})",
            input.running, input.primary
        ),
    ));
    plan.record = Some(record);
    plan.action = Action::StopInstances;
    plan.holds_instances = true;
    plan.look_again = Some(POLL);
    plan
}

/// A record for an upgrade to the declared major at `step`, keeping the
/// steps of `recorded` when it is one.
fn new_record(
    input: &UpgradeInput<'_>,
    recorded: Option<&UpgradeStatus>,
    step: &str,
) -> UpgradeStatus {
    let mut record = recorded.cloned().unwrap_or(UpgradeStatus {
        from_version: i32::try_from(input.running).unwrap_or(i32::MAX),
        to_version: i32::try_from(input.declared).unwrap_or(i32::MAX),
        step: String::new(),
        started_at: None,
        message: None,
        steps: Vec::new(),
        primary: None,
        backup_override: None,
        generation: None,
    });
    enter(&mut record, step, input.now);
    record
}

/// Moves `record` to `step` (recording when it began), unless it is there.
fn enter(record: &mut UpgradeStatus, step: &str, now: Timestamp) {
    if record.step != step {
        record.step = step.to_owned();
        record.steps.push(UpgradeStepRecord {
            step: step.to_owned(),
            time: kube_time(now),
        });
    }
}

/// A failed upgrade to the declared major: its pod removed, then the
/// primary started again with the old major before anything else (a
/// failover meanwhile would promote a replica the upgrade stopped, not
/// failed); tried again once the spec changed.
fn failed(input: &UpgradeInput<'_>, record: &UpgradeStatus) -> UpgradePlan {
    let hold = |action| UpgradePlan {
        action,
        holds_instances: true,
        look_again: Some(POLL),
        ..UpgradePlan::default()
    };
    if input.pod.is_some() {
        return hold(Action::RemovePod);
    }
    if record.generation.is_some() && record.generation != input.generation {
        return start(input, None);
    }
    let restarted = record.primary.as_deref().is_none_or(|p| p != input.primary)
        || input.primary_major == Some(input.running);
    if restarted {
        UpgradePlan::default()
    } else {
        hold(Action::StartPrimary)
    }
}

/// The next move of an upgrade under way.
fn continue_step(input: &UpgradeInput<'_>, recorded: &UpgradeStatus) -> UpgradePlan {
    let mut record = recorded.clone();
    let mut plan = UpgradePlan {
        holds_instances: true,
        look_again: Some(POLL),
        ..UpgradePlan::default()
    };
    if input.paused {
        plan.look_again = None;
        return plan;
    }
    match recorded.step.as_str() {
        STOPPING_INSTANCES if input.pods.is_empty() => {
            to_upgrading(input, &mut record, &mut plan);
            plan.look_again = Some(POD_POLL);
        }
        STOPPING_INSTANCES => plan.action = Action::StopInstances,
        UPGRADING => upgrading(input, &mut record, &mut plan),
        STARTING_PRIMARY if input.primary_major == Some(input.declared) && input.pod.is_none() => {
            to_recloning(input, &mut record, &mut plan);
        }
        STARTING_PRIMARY if input.pod.is_some() => plan.action = Action::RemovePod,
        STARTING_PRIMARY => plan.action = Action::StartPrimary,
        _ if input.replica_volumes.is_empty() => {
            complete(input, &mut record, &mut plan);
        }
        _ => plan.action = Action::RemoveReplicaVolumes,
    }
    plan.record = Some(record);
    plan
}

fn to_upgrading(input: &UpgradeInput<'_>, record: &mut UpgradeStatus, plan: &mut UpgradePlan) {
    enter(record, UPGRADING, input.now);
    record.message = Some(format!(
        "pg_upgrade --check, then --link, on the volume of {}",
        record.primary.as_deref().unwrap_or(input.primary)
    ));
    plan.action = Action::CreatePod;
}

fn upgrading(input: &UpgradeInput<'_>, record: &mut UpgradeStatus, plan: &mut UpgradePlan) {
    match input.pod {
        None | Some(Observed::Orphaned) => plan.action = Action::CreatePod,
        Some(Observed::Running { since }) if input.now.duration_since(*since) > TIMEOUT => {
            fail(
                input,
                record,
                plan,
                format!(
                    "the upgrade pod did not finish within {}h; the instances start again with \
                     PostgreSQL {}",
                    TIMEOUT.as_hours(),
                    record.from_version
                ),
            );
        }
        Some(Observed::Running { .. } | Observed::Removing) => plan.look_again = Some(POD_POLL),
        Some(Observed::Finished {
            exit_code, message, ..
        }) => {
            let outcome = message.as_deref().and_then(Outcome::from_message);
            match outcome {
                Some(outcome)
                    if outcome.failed_step.is_none()
                        && outcome.data_version == Some(input.declared) =>
                {
                    enter(record, STARTING_PRIMARY, input.now);
                    record.message = Some(format!(
                        "{} ({:.1} s); starting the primary with PostgreSQL {}",
                        outcome.message, outcome.duration_seconds, input.declared
                    ));
                    plan.data_version = Some(input.declared);
                    plan.action = Action::RemovePod;
                    plan.events.push(Note::normal(
                        "MajorUpgradeLinked",
                        format!(
                            "the data of {} is PostgreSQL {} now ({:.1} s)",
                            record.primary.as_deref().unwrap_or(input.primary),
                            input.declared,
                            outcome.duration_seconds
                        ),
                    ));
                }
                Some(outcome) => {
                    let step = outcome.failed_step.map_or("upgrade", |s| s.as_str());
                    let after = if outcome.failed_step.is_none_or(|s| s.old_cluster_intact()) {
                        format!(
                            "the old cluster is intact and starts again with PostgreSQL {}",
                            record.from_version
                        )
                    } else {
                        "the old cluster was changed: restore from a backup (see the runbook)"
                            .to_owned()
                    };
                    let why = format!("{step} failed: {}; {after}", outcome.message);
                    fail(input, record, plan, why);
                }
                None => {
                    let how = exit_code
                        .map_or_else(|| "failed".to_owned(), |c| format!("exited with code {c}"));
                    let why = message.as_deref().unwrap_or("no message");
                    let text = format!(
                        "the upgrade pod {how} without an outcome: {why}; the instances start \
                         again with PostgreSQL {}",
                        record.from_version
                    );
                    fail(input, record, plan, text);
                }
            }
        }
    }
}

fn fail(
    input: &UpgradeInput<'_>,
    record: &mut UpgradeStatus,
    plan: &mut UpgradePlan,
    message: String,
) {
    enter(record, FAILED, input.now);
    record.generation = input.generation;
    plan.events.push(Note::warning(
        "MajorUpgradeFailed",
        format!(
            "upgrade to PostgreSQL {} failed: {message}",
            record.to_version
        ),
    ));
    record.message = Some(message);
    plan.action = Action::RemovePod;
}

fn to_recloning(input: &UpgradeInput<'_>, record: &mut UpgradeStatus, plan: &mut UpgradePlan) {
    enter(record, RECLONING_REPLICAS, input.now);
    record.message = Some(format!(
        "the primary serves PostgreSQL {}; removing the replicas' volumes of PostgreSQL {} to \
         clone them again",
        input.declared, record.from_version
    ));
    if input.replica_volumes.is_empty() {
        complete(input, record, plan);
    } else {
        plan.action = Action::RemoveReplicaVolumes;
    }
}

fn complete(input: &UpgradeInput<'_>, record: &mut UpgradeStatus, plan: &mut UpgradePlan) {
    enter(record, COMPLETED, input.now);
    let took = record
        .started_at
        .as_ref()
        .map(|t| input.now.duration_since(t.0).as_secs_f64())
        .unwrap_or_default();
    record.message = Some(format!(
        "upgraded from PostgreSQL {} to {} in {took:.1} s; replicas are cloned again",
        record.from_version, record.to_version
    ));
    plan.events.push(Note::normal(
        "MajorUpgradeCompleted",
        record.message.clone().unwrap_or_default(),
    ));
    plan.holds_instances = false;
    plan.look_again = None;
}

impl UpgradePlan {
    /// Adds the plan's events to the pass's `events`; while it holds the
    /// instances, the pass's other events and acted-on requests are
    /// dropped (no failover, scaling or request is acted on meanwhile).
    pub fn also_held(mut self, events: &mut Vec<Note>, clear: &mut Vec<&'static str>) -> Self {
        if self.holds_instances {
            events.clear();
            clear.clear();
        }
        events.append(&mut self.events);
        self
    }
}

/// Whether `record` is an upgrade under way (the cluster's phase is
/// Upgrading meanwhile).
pub fn under_way(record: Option<&UpgradeStatus>) -> bool {
    record.is_some_and(|r| UNDER_WAY.contains(&r.step.as_str()))
}
