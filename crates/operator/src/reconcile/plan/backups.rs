//! The pass's decisions about data protection: base backups (assigned,
//! recorded, and created by the schedule) and restore rehearsals.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresCluster;

use crate::backups::schedule::Scheduled;
use crate::backups::{BackupInput, BackupPlan};
use crate::failover::FailoverCheck;
use crate::note::Note;
use crate::reconcile::fetch::Observed;
use crate::status::BackupProgress;
use crate::validate::ValidatedCluster;

/// The pass's decisions about backups and restore rehearsals, their
/// events added to `events` and the rehearsal request to `clear` once
/// acted on.
pub(super) fn protect_data(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    check: &FailoverCheck,
    now: Timestamp,
    events: &mut Vec<Note>,
    clear: &mut Vec<&'static str>,
) -> (BackupDecisions, crate::rehearsal::RehearsalPlan) {
    let mut backups = BackupDecisions::decide(cluster, valid, observed, check, now);
    events.append(&mut backups.events());
    let mut rehearsal =
        crate::reconcile::rehearsal::decide(cluster, valid, observed.rehearsal.as_ref(), now);
    events.append(&mut rehearsal.events);
    if rehearsal.clear_request {
        clear.push(labels::REHEARSE);
    }
    (backups, rehearsal)
}

/// What one pass decides of base backups.
#[derive(Default)]
pub struct BackupDecisions {
    /// The assignment, records and events (`None`: not decided in this
    /// pass).
    pub decided: Option<BackupPlan>,
    /// A backup the schedule asks for, to create.
    pub scheduled: Option<Scheduled>,
    /// The schedule's slot whose PostgresBackup exists, to record.
    pub recorded_slot: Option<Timestamp>,
    /// The schedule's next slot after this pass, to look again then.
    pub next_slot: Option<Timestamp>,
    /// The schedule's PostgresBackup that has not started, which a due
    /// slot waits for instead of creating another.
    pub waiting_for: Option<String>,
}

impl BackupDecisions {
    fn decide(
        cluster: &PostgresCluster,
        valid: &ValidatedCluster,
        observed: &Observed,
        check: &FailoverCheck,
        now: Timestamp,
    ) -> Self {
        let (scheduled, recorded_slot) = schedule(valid, observed, cluster, now);
        let decided = decide_backups(cluster, valid, observed, check, now);
        let waiting_for = waiting_for(valid, observed, decided.as_ref());
        BackupDecisions {
            decided,
            // One of its backups waits: the schedule creates no other.
            scheduled: scheduled.filter(|_| waiting_for.is_none()),
            waiting_for,
            recorded_slot,
            next_slot: valid
                .schedule
                .as_ref()
                .and_then(|cron| crate::backups::schedule::next(cron, now)),
        }
    }

    /// The `LastBackupRecent` condition while a schedule is declared, from
    /// a backup completed in this pass or the newest on record.
    pub(super) fn freshness(
        &self,
        cluster: &PostgresCluster,
        valid: &ValidatedCluster,
        now: Timestamp,
    ) -> Option<crate::status::Judgement> {
        let cron = valid.schedule.as_ref()?;
        let recorded = cluster.status.as_ref().and_then(|s| s.backup.as_ref());
        let newest = self
            .decided
            .as_ref()
            .and_then(|d| d.completed.as_ref())
            .map(|(id, at)| (id.as_str(), at.0))
            .or_else(|| {
                let backup = recorded?;
                Some((
                    backup.last_successful_backup.as_deref()?,
                    backup.last_successful_backup_time.as_ref()?.0,
                ))
            });
        let declared = crate::reconcile::rehearsal::declared(cluster, now);
        let (state, reason, mut message) = crate::backups::freshness(cron, newest, declared, now);
        if let Some(backup) = &self.waiting_for {
            message = format!(
                "{message}; {}",
                crate::backups::schedule::waiting_message(backup)
            );
        }
        Some((state, reason, message))
    }

    /// The events of the decisions, taken out for the pass's events.
    fn events(&mut self) -> Vec<Note> {
        self.decided
            .as_mut()
            .map(|plan| std::mem::take(&mut plan.events))
            .unwrap_or_default()
    }

    /// What `status.backup` records of them.
    pub(super) fn progress(&self) -> Option<BackupProgress> {
        self.decided.as_ref().map(|plan| BackupProgress {
            running: plan.running.clone(),
            completed: plan.completed.clone(),
            scheduled: self.recorded_slot.map(Time),
        })
    }
}

/// The pass's backup decisions, once the PostgresBackups were listed and
/// unless the cluster is paused. Only a primary that serves, with no
/// failover or switchover under way, is given a backup.
fn decide_backups(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &Observed,
    check: &FailoverCheck,
    now: Timestamp,
) -> Option<BackupPlan> {
    let list = observed.backups.as_deref().filter(|_| !valid.paused)?;
    let status = cluster.status.as_ref();
    let primary = status
        .and_then(|s| s.current_primary.as_deref())
        .filter(|p| status.and_then(|s| s.target_primary.as_deref()) == Some(*p))
        .filter(|_| check.primary_available == Some(true) && check.record.is_none());
    let pods: Vec<String> = observed
        .children
        .pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(ResourceExt::name_any)
        .collect();
    Some(crate::backups::decide(&BackupInput {
        unable: valid.backups_unable(),
        running: status
            .and_then(|s| s.backup.as_ref())
            .and_then(|b| b.running.as_ref()),
        backups: list,
        reports: &observed.reports,
        pods: &pods,
        primary,
        now: &Time(now),
    }))
}

/// The schedule's PostgresBackup that has not started, unless this pass
/// starts it.
fn waiting_for(
    valid: &ValidatedCluster,
    observed: &Observed,
    decided: Option<&BackupPlan>,
) -> Option<String> {
    let listed = observed.backups.as_deref()?;
    valid.schedule.as_ref()?;
    let starting = decided.and_then(|d| d.running.as_ref()).map(|r| &r.backup);
    let others = listed.iter().filter(|b| Some(&b.name_any()) != starting);
    crate::backups::schedule::waiting(&valid.owner.uid, others).map(ResourceExt::name_any)
}

/// The schedule's backup due now, to create unless it exists; and the
/// slot to record once its PostgresBackup exists (so a failed creation is
/// tried again, never skipped).
fn schedule(
    valid: &ValidatedCluster,
    observed: &Observed,
    cluster: &PostgresCluster,
    now: Timestamp,
) -> (Option<Scheduled>, Option<Timestamp>) {
    let previous = cluster.status.as_ref();
    let (Some(cron), Some(listed)) = (valid.schedule.as_ref(), observed.backups.as_deref()) else {
        return (None, None);
    };
    if valid.paused || valid.backups_unable().is_some() {
        return (None, None);
    }
    let last = previous
        .and_then(|s| s.backup.as_ref())
        .and_then(|b| b.last_scheduled_backup.as_ref())
        .or(cluster.metadata.creation_timestamp.as_ref())
        .map_or(now, |t| t.0);
    let Some(due) = crate::backups::schedule::due(valid.name.as_str(), cron, last, now) else {
        return (None, None);
    };
    if listed.iter().any(|b| b.name_any() == due.name) {
        (None, Some(due.slot))
    } else {
        (Some(due), None)
    }
}
