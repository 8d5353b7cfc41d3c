//! Rolling updates (R9, R27): pods whose template differs from the one the
//! cluster declares now are replaced one at a time, replicas first, each
//! back to ready and streaming before the next; then the primary moves to
//! the most advanced updated replica by a switchover (or, with
//! `spec.upgrade.primaryUpdateMethod: restart`, restarts in place), and
//! the former primary, a replica by then, is replaced last. A pod is
//! replaced by deleting it: its volume stays, and the instance step
//! re-creates the pod on it from the current template.
//!
//! Pure: the decision of one pass from what was observed ([`decide`]).
//! The disruption budgets (`<cluster>-primary`: none of the primary,
//! `<cluster>-replicas`: one replica at a time) are kept by the same rules
//! the budgets state, since the operator deletes pods rather than evicting
//! them: nothing is replaced unless every instance serves, and the primary
//! is only restarted in place when the owner chose that.
//!
//! Rollouts caused by nothing but the operator's own version run for a
//! limited number of clusters at once ([`slots`]), so a new operator
//! version never restarts every cluster together.
//!
//! Settings that take effect only at a restart (`shared_buffers`, ...)
//! roll the same way: an instance whose manager reports them pending
//! ([`PENDING_RESTART`]) is replaced in turn, since the managers of a
//! cluster never restart PostgreSQL for them on their own. A pending
//! change that lowers a standby minimum (`max_connections`, ...) restarts
//! the primary first, in place: a standby restarted first with less than
//! its primary's value could not replay the primary's WAL.

pub mod slots;

use tusk_api::v1alpha1::{PrimaryUpdateMethod, RolloutStatus};

use crate::builders::OPERATOR_VERSION;

/// One instance as the rollout sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Why its pod is outdated; empty when it runs the declared template
    /// and has no setting waiting for a restart.
    pub reasons: Vec<&'static str>,
    /// A pending setting lowers a standby minimum
    /// (`tusk_api::instance::STANDBY_MINIMUMS`): as the primary, it
    /// restarts before the replicas.
    pub lowers_minimums: bool,
    /// Its pod exists, is not being deleted, and is Ready.
    pub ready: bool,
    /// Its manager reports a replica streaming from the primary (for the
    /// primary: that it serves as primary).
    pub streaming: bool,
    /// Received (replica) or current (primary) WAL position, in bytes.
    pub position: Option<u64>,
}

/// Everything one decision needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// Every instance, in serial order.
    pub members: Vec<Member>,
    /// The target primary.
    pub primary: String,
    /// Nothing else is moving: no instance being added, re-created or
    /// removed, no failover or switchover under way, the primary serving.
    pub settled: bool,
    pub method: PrimaryUpdateMethod,
    /// `tusk.dev/pause-rollout: "true"` on the cluster.
    pub paused: bool,
    /// A rollout slot is held for this cluster (needed only when the
    /// operator's version is the whole reason).
    pub slot: bool,
    /// The rollout status of the previous pass: the last pod replaced is
    /// followed until it serves again, even once no pod is outdated.
    pub previous: Option<RolloutStatus>,
}

/// What the rollout does in this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing now.
    Wait,
    /// Delete this instance's pod (never its volume); it is re-created
    /// from the current template.
    Replace(String),
    /// Make this updated replica the primary.
    Switchover(String),
}

/// The decision and what status says about it (`None`: every pod is up
/// to date, no rollout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    pub action: Action,
    pub status: Option<RolloutStatus>,
}

/// Why an instance is restarted though its pod is up to date: its
/// manager reports settings that take effect only at a restart.
pub const PENDING_RESTART: &str = "settings that need a restart";

/// Step names in `status.rollout.step`.
pub mod step {
    pub const PAUSED: &str = "Paused";
    pub const WAITING_FOR_SLOT: &str = "WaitingForSlot";
    pub const WAITING_FOR_REPLICA: &str = "WaitingForReplica";
    pub const REPLACING_REPLICA: &str = "ReplacingReplica";
    pub const SWITCHOVER: &str = "Switchover";
    pub const RESTARTING_PRIMARY: &str = "RestartingPrimary";
}

/// Whether the cluster's pods need an update whose only reason is the
/// operator's version (see [`slots`]).
pub fn operator_only(members: &[Member]) -> bool {
    let mut outdated = members.iter().filter(|m| !m.reasons.is_empty()).peekable();
    outdated.peek().is_some() && outdated.all(|m| m.reasons == [OPERATOR_VERSION])
}

/// Whether the cluster keeps (or takes) a rollout slot: while its pods
/// need the operator's version alone, and after that until the last pod
/// an operator upgrade replaced serves again. A slot given back while
/// that pod still starts would let the next cluster restart alongside it.
pub fn needs_slot(members: &[Member], previous: Option<&RolloutStatus>) -> bool {
    operator_only(members)
        || previous.is_some_and(|p| p.operator_upgrade) && awaited(members, previous).is_some()
}

/// The last pod the previous pass replaced, while it does not serve.
fn awaited<'a>(members: &'a [Member], previous: Option<&RolloutStatus>) -> Option<&'a Member> {
    let instance = previous?.instance.as_deref()?;
    members
        .iter()
        .find(|m| m.name == instance)
        .filter(|m| !serves(m))
}

/// The next step of the rollout.
pub fn decide(input: &Input) -> Rollout {
    let outdated: Vec<&Member> = input
        .members
        .iter()
        .filter(|m| !m.reasons.is_empty())
        .collect();
    if outdated.is_empty() {
        return Rollout {
            action: Action::Wait,
            status: last_replaced(input),
        };
    }
    let mut reasons: Vec<&str> = outdated.iter().flat_map(|m| m.reasons.clone()).collect();
    reasons.sort_unstable();
    reasons.dedup();
    let operator_upgrade = operator_only(&input.members);
    let status = |step: &str, instance: Option<&str>| RolloutStatus {
        step: step.to_owned(),
        instance: instance.map(str::to_owned),
        reason: format!("changed: {}", reasons.join(", ")),
        outdated: outdated.iter().map(|m| m.name.clone()).collect(),
        operator_upgrade,
    };
    let wait = |step: &str, instance: Option<&str>| Rollout {
        action: Action::Wait,
        status: Some(status(step, instance)),
    };
    if input.paused {
        return wait(step::PAUSED, None);
    }
    if operator_upgrade && !input.slot {
        return wait(step::WAITING_FOR_SLOT, None);
    }
    if let Some(busy) = not_serving(input) {
        let step = waiting_step(input.previous.as_ref(), &busy.name);
        return wait(step, Some(&busy.name));
    }
    if !input.settled {
        return wait(step::WAITING_FOR_REPLICA, None);
    }
    if let Some(primary) = outdated
        .iter()
        .find(|m| m.name == input.primary && m.lowers_minimums)
    {
        return Rollout {
            action: Action::Replace(primary.name.clone()),
            status: Some(status(step::RESTARTING_PRIMARY, Some(&primary.name))),
        };
    }
    if let Some(replica) = outdated.iter().find(|m| m.name != input.primary) {
        return Rollout {
            action: Action::Replace(replica.name.clone()),
            status: Some(status(step::REPLACING_REPLICA, Some(&replica.name))),
        };
    }
    // Only the primary is left outdated.
    let best = input
        .members
        .iter()
        .filter(|m| m.name != input.primary)
        .max_by_key(|m| m.position);
    match (input.method, best) {
        (PrimaryUpdateMethod::Switchover, Some(best)) => Rollout {
            action: Action::Switchover(best.name.clone()),
            status: Some(status(step::SWITCHOVER, Some(&best.name))),
        },
        _ => Rollout {
            action: Action::Replace(input.primary.clone()),
            status: Some(status(step::RESTARTING_PRIMARY, Some(&input.primary))),
        },
    }
}

/// The instance that does not serve, if any: the primary restarting in
/// place first, though its standbys stop streaming meanwhile too.
fn not_serving(input: &Input) -> Option<&Member> {
    let mut not_serving = input.members.iter().filter(|m| !serves(m));
    let previous = input.previous.as_ref();
    not_serving
        .clone()
        .find(|m| restarting(previous, &m.name))
        .or_else(|| not_serving.next())
}

/// What a rollout waiting for `instance` is doing.
fn waiting_step(previous: Option<&RolloutStatus>, instance: &str) -> &'static str {
    if restarting(previous, instance) {
        step::RESTARTING_PRIMARY
    } else {
        step::WAITING_FOR_REPLICA
    }
}

fn serves(member: &Member) -> bool {
    member.ready && member.streaming
}

/// Whether the previous pass restarted (or waited for) `instance` as the
/// primary in place.
pub fn restarting(previous: Option<&RolloutStatus>, instance: &str) -> bool {
    previous.is_some_and(|p| {
        p.step == step::RESTARTING_PRIMARY && p.instance.as_deref() == Some(instance)
    })
}

/// With every pod up to date, the status of the rollout while the pod it
/// replaced last does not serve yet (`None` once it does).
fn last_replaced(input: &Input) -> Option<RolloutStatus> {
    let previous = input.previous.as_ref()?;
    let member = awaited(&input.members, Some(previous))?;
    Some(RolloutStatus {
        step: waiting_step(Some(previous), &member.name).to_owned(),
        outdated: Vec::new(),
        ..previous.clone()
    })
}

#[cfg(test)]
mod tests;
