//! The primary (R25): whether it serves, and whether this pass moves it,
//! by a failover ([`failover`]) or a requested switchover ([`switchover`]).
//! Pure: from the previous status, the spec and what was observed to a
//! [`FailoverCheck`] and the events to publish. The time the primary became
//! unavailable is the `PrimaryAvailable` condition's transition time, so a
//! restarted operator keeps counting from the same moment; a promotion's
//! time runs from the decision recorded in `status.lastFailover`, and the
//! standbys it abandoned are recorded there too, so a restarted operator
//! never chooses one of them again in the same failover.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::labels;
use tusk_api::v1alpha1::{BlockedFailover, FailoverRecord, PostgresCluster, PostgresClusterStatus};

use super::fetch::Observed;
use crate::children::{named, not_ready_since, pod_ready};
use crate::failover::approval::{self, Approval};
use crate::failover::promotion::{self, Promotion};
use crate::failover::{self, Decision, FailoverCheck, ReportedStandby};
use crate::note::Note;
use crate::primacy::{self, Verdict};
use crate::switchover::{self, Request};
use crate::validate::ValidatedCluster;

/// `lastFailover.reason` of a failover a person approved.
pub const APPROVED_FAILOVER: &str = "ApprovedFailover";
/// Event reason: a chosen standby did not serve in time; another is chosen.
pub const PROMOTION_ABANDONED: &str = "PromotionAbandoned";
/// Event reason: an approval that does not quote the blocked decision.
pub const APPROVAL_REJECTED: &str = "ApprovalRejected";

/// Judges the recorded primary and, once it has been unavailable for
/// `spec.failover.delaySeconds`, chooses its replacement; judges a
/// promotion under way and, once it is overdue, chooses again.
pub fn judge(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    now: Timestamp,
) -> (FailoverCheck, Vec<Note>) {
    let Some(previous) = cluster.status.as_ref() else {
        return (FailoverCheck::default(), Vec::new());
    };
    let Some(target) = previous.target_primary.as_deref() else {
        return (FailoverCheck::default(), Vec::new());
    };
    let judged = Judged {
        cluster,
        valid,
        observed,
        previous,
        now,
    };
    if previous.current_primary.as_deref() == Some(target) {
        return judged.primary(target);
    }
    // A first primary still bootstrapping has no record and is not judged.
    match crate::status::choice_of_target(previous) {
        Some(record) => judged.promotion(record),
        None => (FailoverCheck::default(), Vec::new()),
    }
}

/// What one pass judges the primary from.
struct Judged<'a> {
    cluster: &'a PostgresCluster,
    valid: &'a ValidatedCluster,
    observed: &'a Observed,
    previous: &'a PostgresClusterStatus,
    now: Timestamp,
}

impl Judged<'_> {
    /// The serving primary `target`: healthy, failing for less than its
    /// delay, or failed and to be replaced.
    fn primary(&self, target: &str) -> (FailoverCheck, Vec<Note>) {
        let previous = self.previous;
        let pod = named(&self.observed.children.pods, target)
            .filter(|p| p.metadata.deletion_timestamp.is_none());
        let report = self.observed.reports.get(target);
        if failover::primary_healthy(pod.is_some_and(pod_ready), report) {
            let serving = FailoverCheck {
                primary_available: Some(true),
                fenced_in: self.observed.lease_fenced_in,
                ..FailoverCheck::default()
            };
            return (serving, Vec::new());
        }
        let observed_down = tusk_api::conditions::find_condition(
            &previous.conditions,
            tusk_api::conditions::PRIMARY_AVAILABLE,
        )
        .filter(|c| c.status == "False")
        .map(|c| c.last_transition_time.0);
        // When a failover or switchover made it the primary (the record's
        // time is the moment it was first seen serving).
        let primary_since = crate::status::choice_of_target(previous).map(|record| record.time.0);
        let since = failover::unavailable_since(
            observed_down,
            pod.and_then(not_ready_since),
            self.observed.lease_quiet_since,
            primary_since,
            self.now,
        );
        // A failover of this primary already decided and blocked is not
        // waited for again: a later pass may date the failure from coarser
        // evidence (whole-second condition times), and waiting again would
        // drop the blocked decision and record a new one, with a new
        // identity that an approval quoting the first would not match.
        let blocked_already = previous
            .failover
            .as_ref()
            .and_then(|f| f.blocked.as_ref())
            .is_some_and(|b| b.from == target);
        let delay = failover::delay_left(since, self.now, self.valid.failover.delay_seconds);
        if let Some(left) = delay.filter(|_| !blocked_already) {
            let waiting = FailoverCheck {
                delay_left: Some(left),
                ..unavailable()
            };
            return (waiting, Vec::new());
        }
        let failed = Failed {
            from: target,
            abandoned: Vec::new(),
            failed_for: self.now.duration_since(since.since).as_secs_f64(),
        };
        self.choose(&failed)
    }

    /// The promotion `record` chose, under way: waiting for it, or, once
    /// it is overdue, choosing again without its target.
    fn promotion(&self, record: &FailoverRecord) -> (FailoverCheck, Vec<Note>) {
        let deleting = named(&self.observed.children.pods, &record.to)
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some());
        let judged = promotion::judge(
            &record.to,
            record.time.0,
            self.now,
            self.valid.failover.promotion_timeout_seconds,
            deleting,
        );
        let why = match judged {
            Promotion::Pending(left) => {
                let waiting = FailoverCheck {
                    delay_left: Some(left),
                    ..FailoverCheck::default()
                };
                return (waiting, Vec::new());
            }
            Promotion::Abandon(why) => why,
        };
        let mut abandoned = record.abandoned.clone();
        abandoned.push(record.to.clone());
        let since_decision = self.now.duration_since(record.time.0).as_secs_f64();
        let failed = Failed {
            from: &record.from,
            abandoned,
            failed_for: record.duration_seconds.unwrap_or(0.0) + since_decision.max(0.0),
        };
        let (mut check, mut notes) = self.choose(&failed);
        if let Some(next) = &check.record {
            let text = format!("{why}: promotion abandoned, promoting {} instead", next.to);
            notes.insert(0, Note::warning(PROMOTION_ABANDONED, text));
        } else if check.blocked.is_none() {
            check.stalled = Some(format!("{why}, and no other standby can take over"));
        }
        (check, notes)
    }

    /// Chooses the standby that replaces `failed.from`, as the declared
    /// durability and a person's approval allow.
    fn choose(&self, failed: &Failed<'_>) -> (FailoverCheck, Vec<Note>) {
        let mut last = last_known(self.previous, self.observed, self.valid, failed.from);
        last.excluded = being_deleted(&self.observed.children.pods);
        last.excluded.extend(failed.abandoned.iter().cloned());
        let reports: Vec<(&str, &InstanceReport)> = self
            .observed
            .reports
            .iter()
            .map(|(n, r)| (n.as_str(), r))
            .collect();
        let durability = self.valid.failover.data_durability;
        let decision = failover::decide(&last, &reports, durability, false);
        let Decision::Blocked {
            best,
            lsn_gap_bytes,
        } = decision
        else {
            return self.promote_when_free(decision, failed, "Failover");
        };
        let before = self
            .previous
            .failover
            .as_ref()
            .and_then(|f| f.blocked.as_ref());
        let mut blocked = approval::blocked(before, failed.from, &best, lsn_gap_bytes, self.now);
        let given = self.cluster.annotations().get(labels::APPROVE_DATA_LOSS);
        match approval::judge(given.map(String::as_str), &blocked) {
            Approval::Approves => {
                let approved = failover::decide(&last, &reports, durability, true);
                if matches!(&approved, Decision::Promote { instance, .. } if *instance == blocked.to)
                {
                    let (mut check, notes) =
                        self.promote_when_free(approved, failed, APPROVED_FAILOVER);
                    if check.record.is_some() {
                        check.clear_approval = true;
                    } else {
                        // Waiting for the lease: the approved decision
                        // keeps its identity, and the approval stands.
                        check.blocked = Some(blocked);
                    }
                    return (check, notes);
                }
                (blocked_check(blocked, false), Vec::new())
            }
            Approval::Rejected(value) => {
                let note = Note::warning(APPROVAL_REJECTED, rejected(&value, &blocked));
                blocked.rejected_approval = Some(value);
                (blocked_check(blocked, true), vec![note])
            }
            Approval::Absent => (blocked_check(blocked, false), Vec::new()),
        }
    }
}

impl Judged<'_> {
    /// Promotes as `decision` says, but never while the failed primary may
    /// still hold the primary lease: then it waits for the lease.
    ///
    /// A standby this failover chose and abandoned may hold the lease too,
    /// and keep renewing it while its promotion hangs: waiting for it
    /// would stall the failover for as long as that lasts (for ever, were
    /// the standby stuck while its lease task runs). When its manager
    /// reports that it does not run as a primary ([`stuck_holder`]), the
    /// next choice is recorded at once instead, without a version to take
    /// over: the newly chosen standby's manager takes the lease only once
    /// the abandoned one releases it (it does as soon as it sees it is no
    /// longer the target) or leaves it unrenewed for its whole duration,
    /// and promotes only under a held lease, so no second primary runs.
    fn promote_when_free(
        &self,
        decision: Decision,
        failed: &Failed<'_>,
        reason: &str,
    ) -> (FailoverCheck, Vec<Note>) {
        let takeover = match (&decision, &self.observed.lease) {
            (Decision::Promote { .. }, Some(lease)) => {
                let reports: Vec<_> = self
                    .observed
                    .reports
                    .iter()
                    .map(|(n, r)| (n.as_str(), r))
                    .collect();
                match primacy::verdict(lease, &reports) {
                    Verdict::Replace { takeover } => takeover,
                    Verdict::Wait(_) if stuck_holder(lease, &failed.abandoned, &reports) => None,
                    Verdict::Wait(left) => {
                        let waiting = FailoverCheck {
                            delay_left: Some(left),
                            ..unavailable()
                        };
                        return (waiting, Vec::new());
                    }
                }
            }
            _ => None,
        };
        let (mut check, notes) = promote(decision, failed, reason, self.now);
        if check.record.is_some() {
            check.lease_takeover = takeover;
        }
        (check, notes)
    }
}

/// True when `lease` is held by one of the `abandoned` standbys whose
/// manager answers in this pass and reports that PostgreSQL does not run
/// as a primary: a promotion that hangs, which has acknowledged nothing.
/// One that does not answer, or serves, is waited for as a failed primary
/// is: commits it acknowledged may be on standbys the next choice lacks.
fn stuck_holder(
    lease: &primacy::LeaseState,
    abandoned: &[String],
    reports: &[(&str, &InstanceReport)],
) -> bool {
    let primacy::LeaseState::Held { holder, .. } = lease else {
        return false;
    };
    abandoned.contains(holder)
        && reports
            .iter()
            .any(|(name, report)| name == holder && report.role != InstanceRole::Primary)
}

/// The primary a failover replaces, and what this failover has tried.
struct Failed<'a> {
    /// The failed primary (of a switchover: the former one).
    from: &'a str,
    /// Standbys this failover chose and gave up, never chosen again.
    abandoned: Vec<String>,
    /// Seconds from the primary's failure (or the switchover request) to now.
    failed_for: f64,
}

fn unavailable() -> FailoverCheck {
    FailoverCheck {
        primary_available: Some(false),
        ..FailoverCheck::default()
    }
}

fn blocked_check(blocked: BlockedFailover, clear_approval: bool) -> FailoverCheck {
    FailoverCheck {
        blocked: Some(blocked),
        clear_approval,
        ..unavailable()
    }
}

/// Why an approval approved nothing, and what it would have to say.
fn rejected(value: &str, blocked: &BlockedFailover) -> String {
    format!(
        "{key}={value:?} approves nothing: the blocked failover (promoting {to} in place of {from}, \
         up to {gap} bytes of WAL lost) is {id}; to approve it, set {key}={id}",
        key = labels::APPROVE_DATA_LOSS,
        to = blocked.to,
        from = blocked.from,
        gap = blocked.lsn_gap_bytes,
        id = blocked.id,
    )
}

/// Pods being deleted: never chosen (their instance is going away).
fn being_deleted(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<String> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .map(ResourceExt::name_any)
        .collect()
}

/// What is known of the failed primary `from` and of its synchronous
/// standbys. Its position and reported standbys come from the freshest
/// source: its own report in this pass when it still answers as a primary
/// listing standbys, otherwise what the status last recorded (a silent
/// primary says nothing any more). Its synchronous sets are the operator's
/// own ([`declared_sets`]).
fn last_known<'a>(
    previous: &'a PostgresClusterStatus,
    observed: &'a Observed,
    valid: &ValidatedCluster,
    from: &'a str,
) -> failover::LastKnown<'a> {
    let last = previous.instances.iter().find(|i| i.name == from);
    let fresh = observed
        .reports
        .get(from)
        .filter(|r| r.role == InstanceRole::Primary && !r.standbys.is_empty());
    let synchronous = valid.synchronous.as_ref().map(|sync| {
        let declared = declared_sets(previous, observed, valid, from);
        match fresh {
            Some(report) => failover::SyncSet::new(
                declared,
                sync,
                report.standbys.iter().map(|s| ReportedStandby {
                    name: &s.name,
                    sync_state: Some(&s.sync_state),
                    flush_lsn: s.flush_lsn.as_deref(),
                }),
            ),
            None => failover::SyncSet::new(
                declared,
                sync,
                previous.instances.iter().map(|i| ReportedStandby {
                    name: &i.name,
                    sync_state: i.sync_state.as_deref(),
                    flush_lsn: i.flush_lsn.as_deref(),
                }),
            ),
        }
    });
    failover::LastKnown {
        primary: from,
        lsn: fresh
            .and_then(|r| r.current_lsn.as_deref())
            .or_else(|| last.and_then(|i| i.lsn.as_deref())),
        timeline: fresh
            .and_then(|r| r.timeline.map(i64::from))
            .or_else(|| last.and_then(|i| i.timeline)),
        synchronous,
        excluded: Vec::new(),
    }
}

/// Every `synchronous_standby_names` the failed primary `from` may have
/// run. Its manager lists every other instance of `status.instances` (any
/// standby while there is none) under the rule of `status.lastValidSpec`;
/// the operator writes both, and the primary applies them a watch event
/// later. So the members are every instance the operator knows of besides
/// `from` (the status, the pods, the reports, and whatever the primary
/// last listed as synchronous): a superset of any set the primary ran,
/// which only asks more standbys to answer. The rules are the one this
/// pass validated and, when it differs, the one the primary was last told
/// (a change in flight).
fn declared_sets(
    previous: &PostgresClusterStatus,
    observed: &Observed,
    valid: &ValidatedCluster,
    from: &str,
) -> Vec<Option<tusk_postgres::synchronous::DeclaredSet>> {
    let mut members: Vec<String> = previous
        .instances
        .iter()
        .map(|i| i.name.clone())
        .chain(observed.children.pods.iter().map(ResourceExt::name_any))
        .chain(observed.reports.keys().cloned())
        .chain(
            observed
                .reports
                .get(from)
                .into_iter()
                .flat_map(|r| r.standbys.iter().map(|s| s.name.clone())),
        )
        .filter(|name| name != from)
        .collect();
    members.sort_unstable();
    members.dedup();
    let told = previous
        .last_valid_spec
        .as_ref()
        .and_then(|record| record.read().ok())
        .and_then(|spec| spec.synchronous().ok());
    let mut rules = vec![valid.synchronous];
    if let Some(told) = told.filter(|told| *told != valid.synchronous) {
        rules.push(told);
    }
    rules
        .into_iter()
        .map(|rule| {
            rule.map(|rule| tusk_postgres::synchronous::DeclaredSet {
                rule,
                members: members.clone(),
            })
        })
        .collect()
}

/// Turns a decision that is not blocked into the check to record and the
/// event: `reason` is the record's.
fn promote(
    decision: Decision,
    failed: &Failed<'_>,
    reason: &str,
    now: Timestamp,
) -> (FailoverCheck, Vec<Note>) {
    let Decision::Promote {
        instance,
        lsn_gap_bytes,
        recovery_point,
    } = decision
    else {
        return (unavailable(), Vec::new());
    };
    let note = Note::warning(
        reason,
        format!(
            "primary {} unavailable for {:.0} s: promoting {instance} (possible loss: {lsn_gap_bytes} bytes of WAL)",
            failed.from, failed.failed_for
        ),
    );
    let record = FailoverRecord {
        time: MicroTime(now),
        from: failed.from.to_owned(),
        to: instance,
        reason: reason.to_owned(),
        lsn_gap_bytes: i64::try_from(lsn_gap_bytes).unwrap_or(i64::MAX),
        recovery_point: Some(recovery_point),
        duration_seconds: Some(failed.failed_for),
        abandoned: failed.abandoned.clone(),
    };
    let promoting = FailoverCheck {
        record: Some(record),
        ..unavailable()
    };
    (promoting, vec![note])
}

/// Acts on a `tusk.dev/promote` request for `requested` while `primary` is
/// the target (see [`switchover`]): the record of a switchover when the
/// cluster can switch over safely now, and the event saying what happens.
pub fn switchover(
    requested: &str,
    primary: &str,
    check: &FailoverCheck,
    observed: &Observed,
    now: Timestamp,
) -> (Option<FailoverRecord>, Option<Note>) {
    let serving = check.primary_available == Some(true) && check.record.is_none();
    let deleting = being_deleted(&observed.children.pods);
    match switchover::evaluate(requested, primary, serving, &observed.reports, &deleting) {
        Request::Start { to } => {
            let note = Note::normal(
                "Switchover",
                format!(
                    "switchover requested: {primary} shuts down cleanly, then {to} is promoted"
                ),
            );
            let record = FailoverRecord {
                time: MicroTime(now),
                from: primary.to_owned(),
                to,
                reason: "Switchover".to_owned(),
                lsn_gap_bytes: 0,
                recovery_point: None,
                duration_seconds: None,
                abandoned: Vec::new(),
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
