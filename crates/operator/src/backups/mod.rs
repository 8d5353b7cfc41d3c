//! Base backups (R28): which PostgresBackup runs next and where, what the
//! instance taking it reported, and when the schedule creates the next
//! one. Pure: the reconcile's plan feeds it what was observed, and apply
//! writes what it decided.
//!
//! One backup at a time per cluster, assigned in `status.backup.running`
//! to one instance ([`taker`]): with `target: preferReplica` (the
//! default) a streaming standby, which copies the files while the primary
//! only starts and stops the backup (through its pgBackRest TLS server,
//! which the primary reports as running), else the primary. The
//! instance's manager reads the assignment, takes the backup, and
//! reports it on `/status`; its report becomes the PostgresBackup's
//! status. A PostgresBackup's status is written once it changes phase and
//! never after it finished.
//!
//! Deleting a PostgresBackup removes only the object: the backup stays in
//! the repository until the retention (`spec.backup.retentionDays`)
//! expires it.

pub mod schedule;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::v1alpha1::{
    BackupAssignment, BackupPhase, BackupServer, BackupTarget, PostgresBackup, PostgresBackupStatus,
};

use crate::cached_cluster::CachedCluster;
use crate::note::Note;

/// The `LastBackupRecent` condition while `spec.backup.schedule` is
/// declared since `declared` (the cluster's creation), from the newest
/// completed backup (id, when): Unknown until the first is due, then
/// False while none completed or when the newest is older than twice the
/// schedule's period.
pub fn freshness(
    cron: &croner::Cron,
    newest: Option<(&str, k8s_openapi::jiff::Timestamp)>,
    declared: k8s_openapi::jiff::Timestamp,
    now: k8s_openapi::jiff::Timestamp,
) -> crate::status::Judgement {
    use tusk_api::conditions::ConditionStatus;
    match newest {
        None if !schedule::older_than_two_periods(cron, declared, now) => (
            ConditionStatus::Unknown,
            "NoBackupYet",
            "no base backup has completed yet".to_owned(),
        ),
        None => (
            ConditionStatus::False,
            "NoBackup",
            "no base backup has completed in twice the schedule's period".to_owned(),
        ),
        Some((id, at)) if schedule::older_than_two_periods(cron, at, now) => (
            ConditionStatus::False,
            "BackupStale",
            format!(
                "the newest base backup, {id} ({at}), is older than twice the schedule's period"
            ),
        ),
        Some((id, at)) => (
            ConditionStatus::True,
            "BackupRecent",
            format!("the newest base backup, {id}, completed at {at}"),
        ),
    }
}

/// What a pass observed of the cluster's backups.
pub struct BackupInput<'a> {
    /// Why the cluster cannot take backups (`None`: it can): no
    /// `spec.backup`, WAL not archived, a destination not supported.
    pub unable: Option<String>,
    /// `status.backup.running` as last written.
    pub running: Option<&'a BackupAssignment>,
    /// The PostgresBackups naming this cluster.
    pub backups: &'a [PostgresBackup],
    /// Reports of the instances that answered.
    pub reports: &'a BTreeMap<String, InstanceReport>,
    /// Instances that have a pod.
    pub pods: &'a [String],
    /// The primary, when it serves and nothing moves it.
    pub primary: Option<&'a str>,
    pub now: &'a Time,
}

/// What the pass does about backups.
#[derive(Debug, Default, PartialEq)]
pub struct BackupPlan {
    /// `status.backup.running` after this pass.
    pub running: Option<BackupAssignment>,
    /// PostgresBackups whose status changes, by name.
    pub records: Vec<(String, PostgresBackupStatus)>,
    /// A backup that completed in this pass: its id and when.
    pub completed: Option<(String, Time)>,
    pub events: Vec<Note>,
}

/// The cluster a PostgresBackup names, to reconcile when it changes.
pub fn cluster_of(backup: &PostgresBackup) -> Option<ObjectRef<CachedCluster>> {
    Some(ObjectRef::new(&backup.spec.cluster).within(&backup.namespace()?))
}

/// The PostgresBackups in `namespace` naming `cluster`.
pub fn of_cluster(
    store: &kube::runtime::reflector::Store<PostgresBackup>,
    namespace: &str,
    cluster: &str,
) -> Vec<PostgresBackup> {
    store
        .state()
        .iter()
        .filter(|b| b.spec.cluster == cluster && b.namespace().as_deref() == Some(namespace))
        .map(|b| PostgresBackup::clone(b))
        .collect()
}

/// The pass's decision.
pub fn decide(input: &BackupInput<'_>) -> BackupPlan {
    let mut plan = BackupPlan::default();
    if let Some(running) = input.running {
        follow(input, running, &mut plan);
    }
    let mut waiting: Vec<&PostgresBackup> = input
        .backups
        .iter()
        .filter(|b| {
            !finished(b) && Some(b.name_any()) != plan.running.as_ref().map(|r| r.backup.clone())
        })
        .filter(|b| !plan.records.iter().any(|(name, _)| *name == b.name_any()))
        .collect();
    waiting.sort_by_key(|b| (b.creation_timestamp().map(|t| t.0), b.name_any()));
    if let Some(unable) = &input.unable {
        for backup in waiting {
            let error = format!("cannot take a base backup: {unable}");
            plan.events.push(Note::warning(
                "BackupFailed",
                format!("{}: {error}", backup.name_any()),
            ));
            plan.records
                .push((backup.name_any(), failed(None, error, input.now)));
        }
        return plan;
    }
    for backup in waiting {
        let name = backup.name_any();
        match (plan.running.is_some(), input.primary) {
            (false, Some(primary)) => {
                let (instance, primary_server) = taker(input, backup.spec.target, primary);
                let role = if primary_server.is_some() {
                    "a standby"
                } else {
                    "the primary"
                };
                plan.running = Some(BackupAssignment {
                    backup: name.clone(),
                    instance: instance.to_owned(),
                    backup_type: backup.spec.backup_type,
                    primary_server,
                });
                plan.events.push(Note::normal(
                    "BackupStarted",
                    format!(
                        "{name}: {} backup assigned to {instance} ({role})",
                        backup.spec.backup_type.pgbackrest()
                    ),
                ));
                plan.records.push((
                    name,
                    PostgresBackupStatus {
                        phase: Some(BackupPhase::Running),
                        instance: Some(instance.to_owned()),
                        ..PostgresBackupStatus::default()
                    },
                ));
            }
            _ if phase(backup).is_none() => plan.records.push((
                name,
                PostgresBackupStatus {
                    phase: Some(BackupPhase::Pending),
                    ..PostgresBackupStatus::default()
                },
            )),
            _ => {}
        }
    }
    plan
}

/// Which instance takes a backup aimed at `target`: with
/// `preferReplica`, the standby streaming with the least replay lag, when
/// `primary` runs its pgBackRest TLS server and has created the stanza,
/// with that server (the standby backs up through it); otherwise, and
/// always with `primary`, the primary.
pub fn taker<'a>(
    input: &BackupInput<'a>,
    target: BackupTarget,
    primary: &'a str,
) -> (&'a str, Option<BackupServer>) {
    // The standby's pgBackRest reads the stanza the primary creates: not
    // before it exists (the primary itself waits for it).
    let server = input
        .reports
        .get(primary)
        .filter(|r| r.archiving.as_ref().is_some_and(|a| a.stanza_created))
        .and_then(|r| r.backup_server.clone());
    let Some(server) = server.filter(|_| target == BackupTarget::PreferReplica) else {
        return (primary, None);
    };
    input
        .reports
        .iter()
        .filter(|(name, _)| input.pods.contains(name))
        .filter(|(_, r)| {
            r.role == InstanceRole::Replica && r.ready && !r.fenced && r.streaming == Some(true)
        })
        .min_by_key(|(name, r)| (r.lag_bytes.unwrap_or(u64::MAX), name.as_str()))
        .map_or((primary, None), |(name, _)| (name.as_str(), Some(server)))
}

/// The assigned backup: its report, once the instance has one.
fn follow(input: &BackupInput<'_>, running: &BackupAssignment, plan: &mut BackupPlan) {
    let name = &running.backup;
    let Some(backup) = input.backups.iter().find(|b| b.name_any() == *name) else {
        // Deleted while running: the instance finishes it; nothing records it.
        return;
    };
    if finished(backup) {
        return;
    }
    let reported = input
        .reports
        .get(&running.instance)
        .and_then(|r| r.backup.as_ref())
        .filter(|b| b.name == *name);
    match reported {
        Some(report) if report.status.finished() => {
            let status = report.status.clone();
            match (&status.phase, &status.backup_id, &status.completed_at) {
                (Some(BackupPhase::Completed), Some(id), Some(at)) => {
                    plan.completed = Some((id.clone(), at.clone()));
                    plan.events.push(Note::normal(
                        "BackupCompleted",
                        format!("{name}: backup {id} completed on {}", running.instance),
                    ));
                }
                _ => plan.events.push(Note::warning(
                    "BackupFailed",
                    format!(
                        "{name}: {}",
                        status
                            .error
                            .as_deref()
                            .unwrap_or("failed without a message")
                    ),
                )),
            }
            plan.records.push((name.clone(), status));
        }
        Some(report) => {
            if backup.status.as_ref() != Some(&report.status) {
                plan.records.push((name.clone(), report.status.clone()));
            }
            plan.running = Some(running.clone());
        }
        None if !input.pods.contains(&running.instance) => {
            let error = format!("{} went away before the backup finished", running.instance);
            plan.events
                .push(Note::warning("BackupFailed", format!("{name}: {error}")));
            plan.records.push((
                name.clone(),
                failed(Some(&running.instance), error, input.now),
            ));
        }
        // Not reported yet (starting, or the manager restarted and reads
        // the assignment again).
        None => plan.running = Some(running.clone()),
    }
}

fn phase(backup: &PostgresBackup) -> Option<BackupPhase> {
    backup.status.as_ref().and_then(|s| s.phase)
}

fn finished(backup: &PostgresBackup) -> bool {
    backup
        .status
        .as_ref()
        .is_some_and(PostgresBackupStatus::finished)
}

fn failed(instance: Option<&str>, error: String, now: &Time) -> PostgresBackupStatus {
    PostgresBackupStatus {
        phase: Some(BackupPhase::Failed),
        completed_at: Some(now.clone()),
        instance: instance.map(str::to_owned),
        error: Some(error),
        ..PostgresBackupStatus::default()
    }
}

#[cfg(test)]
mod tests;
