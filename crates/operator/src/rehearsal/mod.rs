//! Restore rehearsals (R28): when to start one, what its pod found, and
//! whether the last one still vouches for the backups. Pure: the
//! reconcile's plan feeds it what was observed, and apply creates or
//! removes the rehearsal's pod and scratch volume.
//!
//! One rehearsal at a time per cluster, in a pod of its own
//! (`<cluster>-rehearsal`, see [`crate::builders::rehearsal`]) that
//! restores the newest backup and writes its outcome to its termination
//! message. It starts at each slot of `spec.backup.verify.schedule` once a
//! backup completed, and on demand (the `tusk.dev/rehearse` annotation).
//! Its outcome goes to `status.lastRestoreVerification` and an event;
//! then the pod and its volume are removed. The `RestoreRehearsed`
//! condition is False when the last rehearsal failed or is older than
//! twice the schedule's period.

#[cfg(test)]
mod tests;

use croner::Cron;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tusk_api::rehearsal::{Outcome, verification};
use tusk_api::time::kube_time;
use tusk_api::v1alpha1::RestoreVerification;

use crate::backups::schedule;
use crate::note::Note;
use crate::status::Judgement;
use tusk_api::conditions::ConditionStatus;

/// The longest a rehearsal pod may exist before it is failed and removed
/// (a restore that hangs, or a pod that cannot be scheduled).
pub const TIMEOUT: SignedDuration = SignedDuration::from_hours(12);

/// The rehearsal pod as observed.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// Not finished; created at `since`.
    Running { since: Timestamp },
    /// The pod or its scratch volume is being deleted.
    Removing,
    /// A scratch volume without its pod (a removal that stopped half-way).
    Orphaned,
    /// Its container ended (or the pod failed) at `at`.
    Finished {
        exit_code: Option<i32>,
        /// The termination message, or the pod's reason for failing.
        message: Option<String>,
        at: Timestamp,
    },
}

/// What a pass observed of rehearsals.
pub struct RehearsalInput<'a> {
    /// `spec.backup.verify.schedule`, read; `None` when not declared.
    pub schedule: Option<&'a Cron>,
    /// A rehearsal asked for now (the annotation).
    pub requested: bool,
    /// Why the cluster cannot be rehearsed (no archiving destination).
    pub unable: Option<String>,
    pub last: Option<&'a RestoreVerification>,
    /// When the newest base backup completed (none: nothing to restore).
    pub last_backup: Option<&'a Time>,
    pub pod: Option<&'a Observed>,
    pub now: Timestamp,
}

/// What the pass does about rehearsals.
#[derive(Debug, Default, PartialEq)]
pub struct RehearsalPlan {
    /// Create the pod and its scratch volume.
    pub start: bool,
    /// A finished rehearsal to record in status.
    pub record: Option<RestoreVerification>,
    /// Remove the pod and its scratch volume.
    pub remove: bool,
    /// The request annotation was acted on (or cannot be): remove it.
    pub clear_request: bool,
    pub events: Vec<Note>,
    /// When to look again without a change: a running rehearsal is polled.
    pub look_again: Option<std::time::Duration>,
    /// The schedule's next slot (set by the reconcile, to look then).
    pub next_slot: Option<Timestamp>,
}

/// How often a running rehearsal is looked at (its pod's end also
/// triggers a pass when the pod is watched, but the operator does not
/// watch rehearsal pods).
const POLL: std::time::Duration = std::time::Duration::from_secs(10);

pub fn decide(input: &RehearsalInput<'_>) -> RehearsalPlan {
    let mut plan = RehearsalPlan::default();
    match input.pod {
        Some(Observed::Finished {
            exit_code,
            message,
            at,
        }) => {
            plan.remove = true;
            let recorded = input.last.is_some_and(|l| l.time.0 >= *at);
            if !recorded {
                record(&mut plan, finished(*exit_code, message.as_deref(), *at));
            }
        }
        Some(Observed::Running { since }) if input.now.duration_since(*since) > TIMEOUT => {
            plan.remove = true;
            record(
                &mut plan,
                failure(
                    format!(
                        "the rehearsal did not finish within {}h",
                        TIMEOUT.as_hours()
                    ),
                    input.now,
                ),
            );
        }
        Some(Observed::Running { .. } | Observed::Removing) => plan.look_again = Some(POLL),
        Some(Observed::Orphaned) => {
            plan.remove = true;
            plan.look_again = Some(POLL);
        }
        None => start_if_due(&mut plan, input),
    }
    plan
}

fn start_if_due(plan: &mut RehearsalPlan, input: &RehearsalInput<'_>) {
    if let Some(why) = &input.unable {
        if input.requested {
            plan.clear_request = true;
            plan.events.push(Note::warning(
                "RehearsalRefused",
                format!("no restore rehearsal: {why}"),
            ));
        }
        return;
    }
    let Some(last_backup) = input.last_backup else {
        if input.requested {
            plan.clear_request = true;
            plan.events.push(Note::warning(
                "RehearsalRefused",
                "no restore rehearsal: no base backup has completed yet".to_owned(),
            ));
        }
        return;
    };
    let since = input.last.map_or(last_backup.0, |l| l.time.0);
    let slot_passed = input
        .schedule
        .and_then(|cron| schedule::due("", cron, since, input.now))
        .is_some();
    if input.requested || slot_passed {
        plan.start = true;
        plan.clear_request = input.requested;
        plan.look_again = Some(POLL);
        plan.events.push(Note::normal(
            "RehearsalStarted",
            "restoring the newest backup into a scratch instance".to_owned(),
        ));
    }
}

fn record(plan: &mut RehearsalPlan, verification: RestoreVerification) {
    let text = format!(
        "backup {}: {}",
        if verification.backup_id.is_empty() {
            "?"
        } else {
            &verification.backup_id
        },
        verification.message.clone().unwrap_or_default()
    );
    plan.events.push(if verification.succeeded {
        Note::normal("RehearsalSucceeded", text)
    } else {
        let check = verification.failed_check.clone().unwrap_or_default();
        Note::warning("RehearsalFailed", format!("check {check} failed: {text}"))
    });
    plan.record = Some(verification);
}

/// The record of a rehearsal pod that ended: its outcome when it wrote
/// one, else a failure saying how the pod ended.
fn finished(exit_code: Option<i32>, message: Option<&str>, at: Timestamp) -> RestoreVerification {
    if let Some(outcome) = message.and_then(Outcome::from_message) {
        return verification(&outcome, kube_time(at));
    }
    let how = exit_code.map_or_else(|| "failed".to_owned(), |c| format!("exited with code {c}"));
    let why = message
        .filter(|m| !m.trim().is_empty())
        .unwrap_or("no message");
    failure(format!("the rehearsal pod {how}: {why}"), at)
}

fn failure(message: String, at: Timestamp) -> RestoreVerification {
    RestoreVerification {
        time: kube_time(at),
        backup_id: String::new(),
        succeeded: false,
        duration_seconds: None,
        recovery_point: None,
        failed_check: Some("rehearsal".to_owned()),
        message: Some(message),
    }
}

/// The `RestoreRehearsed` condition while rehearsals are declared since
/// `declared` (the cluster's creation): Unknown until the first one is
/// due (for up to twice the schedule's period), then False while none
/// passed, when the last failed, or when the last success is older than
/// twice the period.
pub fn condition(
    cron: &Cron,
    last: Option<&RestoreVerification>,
    declared: Timestamp,
    now: Timestamp,
) -> Judgement {
    let Some(last) = last else {
        if !schedule::older_than_two_periods(cron, declared, now) {
            return (
                ConditionStatus::Unknown,
                "NotRehearsedYet",
                "no restore rehearsal has run yet".to_owned(),
            );
        }
        return (
            ConditionStatus::False,
            "NotRehearsed",
            "no restore rehearsal has run in twice the schedule's period".to_owned(),
        );
    };
    if !last.succeeded {
        let check = last.failed_check.as_deref().unwrap_or("rehearsal");
        let why = last.message.as_deref().unwrap_or_default();
        return (
            ConditionStatus::False,
            "RehearsalFailed",
            format!("check {check} failed: {why}"),
        );
    }
    if schedule::older_than_two_periods(cron, last.time.0, now) {
        return (
            ConditionStatus::False,
            "RehearsalStale",
            format!(
                "the last successful rehearsal ({}) is older than twice the schedule's period",
                last.time.0
            ),
        );
    }
    (
        ConditionStatus::True,
        "RehearsalSucceeded",
        format!("backup {} restored and checked", last.backup_id),
    )
}
