//! When to look at a cluster again, from what this pass wrote and
//! decided. Child changes (a pod becoming ready) trigger reconciles
//! through the watches; these delays only bound how stale the polled
//! instance figures get. Pure.

use std::time::Duration;

use tusk_api::v1alpha1::{ClusterPhase, PostgresClusterStatus};

use super::Plan;
use crate::failover::FailoverCheck;
use crate::plan::InstanceStep;
use crate::status;

/// While the cluster is still converging.
const PROGRESS: Duration = Duration::from_secs(10);
/// While a standby is being promoted: every pass after the promotion
/// delays `-rw` moving to the new primary, and a promotion lasts a few
/// hundred milliseconds.
const PROMOTING: Duration = Duration::from_millis(100);
/// While the primary is unavailable and the failover delay runs.
const FAILING: Duration = Duration::from_secs(1);
/// While a rolling update replaces pods: a replaced replica is followed
/// until it streams again (the pod's readiness triggers a reconcile, the
/// instance manager's report of streaming does not).
const ROLLING: Duration = Duration::from_secs(2);
/// While the cache lags behind the operator's own last write.
pub const STALE: Duration = Duration::from_millis(100);
/// After a quiet lease's holder must have stopped PostgreSQL: time for
/// the fast shutdown and its manager's report of it.
const FENCE_SEEN: Duration = Duration::from_millis(200);
/// Periodic resync of a converged cluster (R7).
const RESYNC: Duration = Duration::from_secs(60);

/// While a base backup runs: its progress and outcome reach the
/// PostgresBackup only when the instance taking it is polled.
const BACKING_UP: Duration = Duration::from_secs(5);

/// After a spec change: the instance managers apply new parameters within
/// a second or two, and one that needs a restart shows only in their next
/// reports, which trigger no reconcile; the rolling restart then starts
/// this soon rather than at the next resync.
const SPEC_CHANGED: Duration = Duration::from_secs(5);

/// When to look again; `held`: a standby reports a minimum held at its
/// primary's former value ([`tusk_api::instance::InstanceReport::held_minimums`]).
pub fn after(status: &PostgresClusterStatus, plan: &Plan<'_>, held: bool) -> Duration {
    let mut wait = delay(status, &plan.primary, &plan.instances.step);
    if let Some(fenced) = fence_seen_in(&plan.primary) {
        wait = wait.min(fenced);
    }
    if spec_changed(plan.status.previous, plan.status.generation)
        || rollout_ended(plan.status.previous, status)
        || held
    {
        wait = wait.min(SPEC_CHANGED);
    }
    if status.backup.as_ref().is_some_and(|b| b.running.is_some())
        || plan.backups.scheduled.is_some()
    {
        wait = wait.min(BACKING_UP);
    }
    for poll in [plan.rehearsal.look_again, plan.upgrade.look_again]
        .into_iter()
        .flatten()
    {
        wait = wait.min(poll);
    }
    // The schedules' next slots, to the second.
    let now = plan.status.now.0;
    for next in [plan.backups.next_slot, plan.rehearsal.next_slot]
        .into_iter()
        .flatten()
    {
        let left = next.as_second() - now.as_second();
        let left = Duration::from_secs(u64::try_from(left.max(1)).unwrap_or(1));
        wait = wait.min(left);
    }
    wait
}

/// A primary still serving while its lease is quiet has either lost the
/// lease (cut off from the API server: its manager stops it and says so,
/// and it is replaced at once, without waiting for the lease to expire) or
/// renews late: look again once it would have stopped, not only when its
/// pod turns unready (two failed probes later).
fn fence_seen_in(primary: &FailoverCheck) -> Option<Duration> {
    primary
        .fenced_in
        .filter(|_| primary.primary_available == Some(true))
        .map(|fenced| fenced + FENCE_SEEN)
}

/// While a declared role is not reported `Reconciled` (new, or failing):
/// the primary's manager acts on the declaration within seconds, and its
/// report of it triggers no reconcile.
const ROLES_SETTLING: Duration = Duration::from_secs(10);

/// How soon to look again for the declared roles' sake: while one is
/// missing from `status.roles` or not `Reconciled` there.
pub fn roles_settling(
    declared: &[tusk_api::v1alpha1::RoleSpec],
    status: &PostgresClusterStatus,
) -> Option<Duration> {
    use tusk_api::v1alpha1::RoleState;
    let settled = declared.iter().all(|role| {
        status
            .roles
            .iter()
            .any(|r| r.name == role.name && r.state == RoleState::Reconciled)
    });
    (!settled).then_some(ROLES_SETTLING)
}

/// Whether this pass is the first to see `generation` of the spec.
fn spec_changed(previous: Option<&PostgresClusterStatus>, generation: Option<i64>) -> bool {
    generation.is_some() && previous.and_then(|p| p.observed_generation) != generation
}

/// Whether a standby holds a standby minimum above its declared value:
/// once it replays its primary's lowered value, it reports the declared
/// one pending a restart, which only a poll of it shows; it is looked at
/// this soon until then (a standby slower to replay than the look after
/// the rollout's end waited at the resync before).
pub fn standby_held<'r>(
    reports: impl IntoIterator<Item = &'r tusk_api::instance::InstanceReport>,
) -> bool {
    reports.into_iter().any(|r| !r.held_minimums.is_empty())
}

/// Whether this pass ended a rollout. Its restarts may have more to
/// follow that only the instance managers' next reports show: a primary
/// restarted with a lowered standby minimum writes it to its WAL, and each
/// standby reports the setting pending once it replayed that (until then
/// its manager holds it at the primary's former value); the rollout goes
/// on this soon rather than at the next resync.
fn rollout_ended(previous: Option<&PostgresClusterStatus>, status: &PostgresClusterStatus) -> bool {
    previous.is_some_and(|p| p.rollout.is_some()) && status.rollout.is_none()
}

fn delay(status: &PostgresClusterStatus, primary: &FailoverCheck, step: &InstanceStep) -> Duration {
    // A promotion under way: look again very soon, so the new primary is
    // recorded (and `-rw` follows it) as soon as it serves.
    // One that stalled (overdue, nothing else to choose) only waits for its
    // target to come back: every second is enough.
    if status::promotion_under_way(status) {
        return if primary.stalled.is_some() {
            FAILING
        } else {
            PROMOTING
        };
    }
    // A failing primary: every second, so the failover starts when its
    // delay ends (and not up to a second after).
    if primary.primary_available == Some(false) {
        let wait = primary.delay_left.map_or(FAILING, |left| left.min(FAILING));
        return wait.max(STALE);
    }
    let rolling = status.rollout.as_ref().is_some_and(|r| {
        r.step != crate::rollout::step::PAUSED && r.step != crate::rollout::step::WAITING_FOR_SLOT
    });
    if rolling {
        return ROLLING;
    }
    // WAL archiving not yet confirmed, or failing: its state reaches the
    // status only when the primary is polled, so poll it as while
    // converging (a failure and its recovery show within seconds).
    let archiving_unconfirmed = status
        .conditions
        .iter()
        .any(|c| c.type_ == tusk_api::conditions::CONTINUOUS_ARCHIVING && c.status != "True");
    if status.phase == Some(ClusterPhase::Ready)
        && *step == InstanceStep::Steady
        && !archiving_unconfirmed
    {
        RESYNC
    } else {
        PROGRESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::InstanceName;

    #[test]
    fn a_spec_change_is_looked_at_again_soon_once() {
        let seen = |generation: i64| PostgresClusterStatus {
            observed_generation: Some(generation),
            ..PostgresClusterStatus::default()
        };
        assert!(spec_changed(Some(&seen(3)), Some(4)), "a new generation");
        assert!(spec_changed(None, Some(1)), "a new cluster");
        assert!(!spec_changed(Some(&seen(4)), Some(4)), "seen already");
        assert!(!spec_changed(Some(&seen(4)), None));
    }

    fn status(
        phase: ClusterPhase,
        target: &str,
        current: &str,
        chosen: bool,
    ) -> PostgresClusterStatus {
        serde_json::from_value(serde_json::json!({
            "phase": phase,
            "targetPrimary": target,
            "currentPrimary": current,
            "lastFailover": chosen.then(|| serde_json::json!({
                "time": "2026-01-01T10:00:00Z", "from": current, "to": target,
                "reason": "Switchover", "lsnGapBytes": 0,
            })),
        }))
        .expect("a status")
    }

    fn archiving(status: &PostgresClusterStatus, state: &str) -> PostgresClusterStatus {
        let mut status = status.clone();
        status.conditions.push(
            serde_json::from_value(serde_json::json!({
                "type": tusk_api::conditions::CONTINUOUS_ARCHIVING, "status": state,
                "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T10:00:00Z",
            }))
            .expect("a condition"),
        );
        status
    }

    fn failing(left_ms: Option<u64>) -> FailoverCheck {
        FailoverCheck {
            primary_available: Some(false),
            delay_left: left_ms.map(Duration::from_millis),
            ..FailoverCheck::default()
        }
    }

    #[test]
    fn a_standby_holding_a_minimum_is_looked_at_again_soon() {
        let report = |held: &[&str]| {
            let mut report: tusk_api::instance::InstanceReport =
                serde_json::from_value(serde_json::json!({
                    "name": "db-2", "role": "replica", "phase": "running",
                    "ready": true, "fenced": false, "pendingRestart": [],
                }))
                .expect("a report");
            report.held_minimums = held.iter().map(|h| (*h).to_owned()).collect();
            report
        };
        assert!(standby_held(&[report(&[]), report(&["max_connections"])]));
        assert!(!standby_held(&[report(&[]), report(&[])]));
        assert!(!standby_held(&[]));
    }

    #[test]
    fn a_serving_primary_with_a_quiet_lease_is_looked_at_once_it_would_have_fenced() {
        let serving = |fenced_in: Option<u64>| FailoverCheck {
            primary_available: Some(true),
            fenced_in: fenced_in.map(Duration::from_millis),
            ..FailoverCheck::default()
        };
        assert_eq!(
            fence_seen_in(&serving(Some(300))),
            Some(Duration::from_millis(500))
        );
        assert_eq!(fence_seen_in(&serving(None)), None);
        let failing = FailoverCheck {
            primary_available: Some(false),
            ..serving(Some(300))
        };
        assert_eq!(fence_seen_in(&failing), None, "failing: its own delays");
    }

    #[test]
    fn the_pass_that_ends_a_rollout_looks_again_soon() {
        let rolling: PostgresClusterStatus = serde_json::from_value(serde_json::json!({
            "rollout": {"step": "RestartingPrimary", "instance": "db-1",
                        "reason": "changed: settings that need a restart"},
        }))
        .expect("a status");
        let done = PostgresClusterStatus::default();
        assert!(rollout_ended(Some(&rolling), &done));
        assert!(!rollout_ended(Some(&rolling), &rolling), "still rolling");
        assert!(!rollout_ended(Some(&done), &done), "nothing rolled");
        assert!(!rollout_ended(None, &done));
    }

    #[test]
    fn a_cluster_is_looked_at_again_as_soon_as_something_may_change() {
        use ClusterPhase::*;
        let steady = InstanceStep::Steady;
        let waiting = InstanceStep::WaitForReady(InstanceName::recorded("db-2"));
        let ready = status(Ready, "db-1", "db-1", false);
        let cases = [
            (
                status(Ready, "db-2", "db-1", true),
                FailoverCheck::default(),
                &steady,
                PROMOTING,
            ),
            (ready.clone(), failing(None), &steady, FAILING),
            (
                ready.clone(),
                failing(Some(400)),
                &steady,
                Duration::from_millis(400),
            ),
            (ready.clone(), failing(Some(20)), &steady, STALE),
            (ready.clone(), FailoverCheck::default(), &steady, RESYNC),
            (
                archiving(&ready, "True"),
                FailoverCheck::default(),
                &steady,
                RESYNC,
            ),
            (
                archiving(&ready, "False"),
                FailoverCheck::default(),
                &steady,
                PROGRESS,
            ),
            (ready, FailoverCheck::default(), &waiting, PROGRESS),
            (
                status(Provisioning, "db-1", "", false),
                FailoverCheck::default(),
                &steady,
                PROGRESS,
            ),
        ];
        for (status, primary, step, expected) in cases {
            assert_eq!(
                delay(&status, &primary, step),
                expected,
                "{status:?} {primary:?}"
            );
        }
    }
}

#[cfg(test)]
mod roles_tests {
    use super::*;
    use tusk_api::v1alpha1::{RoleSpec, RoleState, RoleStatus};

    fn status(roles: &[(&str, RoleState)]) -> PostgresClusterStatus {
        PostgresClusterStatus {
            roles: roles
                .iter()
                .map(|(name, state)| RoleStatus {
                    name: (*name).into(),
                    state: *state,
                    reason: None,
                })
                .collect(),
            ..PostgresClusterStatus::default()
        }
    }

    #[test]
    fn a_new_or_failed_role_is_looked_at_again_soon_and_settled_ones_are_not() {
        let declared = [RoleSpec::named("web"), RoleSpec::named("late")];
        let settled = status(&[
            ("web", RoleState::Reconciled),
            ("late", RoleState::Reconciled),
        ]);
        assert_eq!(roles_settling(&declared, &settled), None);
        let failed = status(&[("web", RoleState::Reconciled), ("late", RoleState::Failed)]);
        assert_eq!(roles_settling(&declared, &failed), Some(ROLES_SETTLING));
        let new = status(&[("web", RoleState::Reconciled)]);
        assert_eq!(roles_settling(&declared, &new), Some(ROLES_SETTLING));
        assert_eq!(roles_settling(&[], &new), None);
    }
}
