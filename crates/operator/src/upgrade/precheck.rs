//! The pre-check of a major upgrade (step `PreChecking`, see
//! [`super`]): `pg_upgrade --check` on a restore of the newest backup in a
//! pod of its own, while every instance serves. Its pod is created,
//! awaited and its outcome acted on: a pass moves on to stopping the
//! instances once the primary serves; a failure fails the upgrade with
//! nothing stopped.

use tusk_api::time::kube_time;
use tusk_api::upgrade::Outcome;
use tusk_api::v1alpha1::UpgradeStatus;

use super::{
    Action, CheckAction, FAILED, POLL, PRE_CHECKING, TIMEOUT, UpgradeInput, UpgradePlan, enter,
    fail, new_record, stop_instances,
};
use crate::note::Note;
use crate::rehearsal::Observed;

/// No newer major declared: a pre-check on record for another one is
/// ended (nothing was stopped for it).
pub(super) fn abandoned(input: &UpgradeInput<'_>) -> UpgradePlan {
    let mut plan = UpgradePlan::default();
    if let Some(record) = input.recorded.filter(|r| r.step == PRE_CHECKING) {
        let mut record = record.clone();
        enter(&mut record, FAILED, input.now);
        record.message = Some(format!(
            "abandoned during the pre-check: spec.postgres.version is {} now; nothing was stopped",
            input.declared
        ));
        plan.record = Some(record);
    }
    plan
}

/// Starts the pre-check: its pod restores the newest backup while every
/// instance serves.
pub(super) fn start(input: &UpgradeInput<'_>) -> UpgradePlan {
    if input.check.is_some() {
        // An earlier check's pod (of another version or spec) is removed
        // first: its outcome must never pass for this one's.
        return UpgradePlan {
            check: CheckAction::Remove,
            look_again: Some(POLL),
            ..UpgradePlan::default()
        };
    }
    let mut record = new_record(input, None, PRE_CHECKING);
    record.started_at = Some(kube_time(input.now));
    record.generation = input.generation;
    record.message = Some(format!(
        "pg_upgrade --check to PostgreSQL {} on a restore of the newest backup; every instance \
         serves meanwhile",
        input.declared
    ));
    let mut plan = UpgradePlan {
        check: CheckAction::Create,
        look_again: Some(POLL),
        ..UpgradePlan::default()
    };
    plan.events.push(Note::normal(
        "MajorUpgradePreChecking",
        format!(
            "upgrade from PostgreSQL {} to {}: pg_upgrade --check on a restore of the newest \
             backup before anything stops",
            input.running, input.declared
        ),
    ));
    plan.record = Some(record);
    plan
}

/// The pre-check under way: its pod created, awaited, and its outcome
/// acted on.
pub(super) fn continue_check(input: &UpgradeInput<'_>, recorded: &UpgradeStatus) -> UpgradePlan {
    let mut plan = UpgradePlan {
        look_again: Some(POLL),
        ..UpgradePlan::default()
    };
    if input.paused {
        plan.look_again = None;
        return plan;
    }
    let mut record = recorded.clone();
    let ended = |record: &mut UpgradeStatus, plan: &mut UpgradePlan, why: String| {
        let why = format!(
            "{why}; nothing was stopped: every instance serves PostgreSQL {}",
            record.from_version
        );
        fail(input, record, plan, why);
        plan.action = Action::None;
        plan.check = CheckAction::Remove;
    };
    match input.check {
        None | Some(Observed::Orphaned) => plan.check = CheckAction::Create,
        Some(Observed::Running { since }) if input.now.duration_since(*since) > TIMEOUT => {
            let why = format!(
                "the pre-check pod did not finish within {}h",
                TIMEOUT.as_hours()
            );
            ended(&mut record, &mut plan, why);
        }
        Some(Observed::Running { .. } | Observed::Removing) => return plan,
        Some(Observed::Finished {
            exit_code, message, ..
        }) => match message.as_deref().and_then(Outcome::from_message) {
            Some(outcome) if outcome.failed_step.is_none() => {
                let checked = format!("{} in {:.1} s", outcome.message, outcome.duration_seconds);
                let mut next = stop_instances(input, record, checked);
                if next.action == Action::StopInstances {
                    next.check = CheckAction::Remove;
                }
                return next;
            }
            Some(outcome) => {
                let step = outcome.failed_step.map_or("pre-check", |s| s.as_str());
                let why = format!("the pre-check's {step} failed: {}", outcome.message);
                ended(&mut record, &mut plan, why);
            }
            None => {
                let how = exit_code
                    .map_or_else(|| "failed".to_owned(), |c| format!("exited with code {c}"));
                let why = format!(
                    "the pre-check pod {how} without an outcome: {}",
                    message.as_deref().unwrap_or("no message")
                );
                ended(&mut record, &mut plan, why);
            }
        },
    }
    plan.record = Some(record);
    plan
}
