//! `spec.backup.schedule`: a five-field cron expression in UTC (or
//! `@hourly`, `@daily`, `@weekly`, `@monthly`), read with `croner`.
//!
//! A slot that passed creates one PostgresBackup named after the slot
//! (`<cluster>-<YYYYMMDDhhmmss>`), so a repeated pass creates the same
//! object, never a second one. Slots missed while the operator was down
//! make one backup, at the newest missed slot, not a burst. While a
//! backup the schedule created has not started (no instance can take it:
//! none serves, say), the schedule creates no other ([`waiting`]): one
//! waits at a time, and the newest slot is taken once it has started.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tusk_api::v1alpha1::{BackupPhase, PostgresBackup};

/// A backup the schedule asks for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheduled {
    /// The PostgresBackup's name.
    pub name: String,
    /// The slot it is for (recorded as `status.backup.lastScheduledBackup`).
    pub slot: Timestamp,
}

/// The schedule, or why it cannot be read.
pub fn parse(schedule: &str) -> Result<Cron, String> {
    Cron::from_str(schedule).map_err(|e| format!("`{schedule}` is not a cron expression: {e}"))
}

/// The backup due now: the newest slot at or before `now` that is later
/// than `last` (the last slot a backup was created for, or, for a
/// schedule that never ran, the time it was declared).
pub fn due(cluster: &str, cron: &Cron, last: Timestamp, now: Timestamp) -> Option<Scheduled> {
    let slot = cron
        .find_previous_occurrence(&chrono_time(now)?, true)
        .ok()?;
    let slot = Timestamp::from_second(slot.timestamp()).ok()?;
    (slot > last).then(|| Scheduled {
        name: format!("{cluster}-{}", slot.strftime("%Y%m%d%H%M%S")),
        slot,
    })
}

/// The oldest PostgresBackup the schedule created (owned by the cluster
/// whose uid is `owner`) that has not started: while there is one, the
/// schedule creates no other. Backups people create are not counted.
pub fn waiting<'b>(
    owner: &str,
    backups: impl IntoIterator<Item = &'b PostgresBackup>,
) -> Option<&'b PostgresBackup> {
    backups
        .into_iter()
        .filter(|b| b.owner_references().iter().any(|o| o.uid == owner))
        .filter(|b| {
            let phase = b.status.as_ref().and_then(|s| s.phase);
            phase.is_none_or(|p| p == BackupPhase::Pending)
        })
        .min_by_key(|b| (b.creation_timestamp().map(|t| t.0), b.name_any()))
}

/// What the `LastBackupRecent` condition adds while the schedule waits
/// for `backup` to start.
pub fn waiting_message(backup: &str) -> String {
    format!("the schedule waits for its PostgresBackup {backup} to start before it creates another")
}

/// The first slot after `now`.
pub fn next(cron: &Cron, now: Timestamp) -> Option<Timestamp> {
    let slot = cron.find_next_occurrence(&chrono_time(now)?, false).ok()?;
    Timestamp::from_second(slot.timestamp()).ok()
}

/// True when `since` is older than twice the schedule's period (the time
/// between the two slots after it).
pub fn older_than_two_periods(cron: &Cron, since: Timestamp, now: Timestamp) -> bool {
    let period = next(cron, since)
        .and_then(|first| Some((first, next(cron, first)?)))
        .map(|(first, second)| second.duration_since(first));
    period.is_some_and(|p| now.duration_since(since) > p * 2)
}

fn chrono_time(time: Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(time.as_second(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a time")
    }

    #[test]
    fn a_passed_slot_is_due_once_and_named_after_it() {
        let daily = parse("0 3 * * *").expect("valid");
        let declared = at("2026-12-01T10:00:00Z");
        assert_eq!(
            due("db", &daily, declared, at("2026-12-02T02:59:59Z")),
            None
        );
        let due_now = due("db", &daily, declared, at("2026-12-02T03:00:30Z")).expect("due");
        assert_eq!(due_now.name, "db-20261202030000");
        assert_eq!(due_now.slot, at("2026-12-02T03:00:00Z"));
        // Recorded: not due again until the next slot.
        assert_eq!(
            due("db", &daily, due_now.slot, at("2026-12-02T20:00:00Z")),
            None
        );
        assert_eq!(
            next(&daily, at("2026-12-02T20:00:00Z")),
            Some(at("2026-12-03T03:00:00Z"))
        );
    }

    #[test]
    fn missed_slots_make_one_backup_at_the_newest() {
        let hourly = parse("@hourly").expect("valid");
        let scheduled = due(
            "db",
            &hourly,
            at("2026-12-01T10:00:00Z"),
            at("2026-12-01T15:20:00Z"),
        )
        .expect("due");
        assert_eq!(scheduled.name, "db-20261201150000");
    }

    fn backup(
        name: &str,
        owner: Option<&str>,
        phase: Option<&str>,
        created: &str,
    ) -> PostgresBackup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresBackup",
            "metadata": {
                "name": name, "namespace": "shop", "creationTimestamp": created,
                "ownerReferences": owner.map(|uid| vec![serde_json::json!({
                    "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                    "name": "db", "uid": uid, "controller": true,
                })]),
            },
            "spec": {"cluster": "db"},
            "status": phase.map(|p| serde_json::json!({"phase": p})),
        }))
        .expect("a backup")
    }

    #[test]
    fn the_schedule_waits_while_one_of_its_backups_has_not_started() {
        let first = backup(
            "db-20261202030000",
            Some("u1"),
            Some("Pending"),
            "2026-12-02T03:00:01Z",
        );
        let second = backup(
            "db-20261203030000",
            Some("u1"),
            None,
            "2026-12-03T03:00:01Z",
        );
        let waiting_for =
            |backups: &[PostgresBackup]| waiting("u1", backups).map(ResourceExt::name_any);
        assert_eq!(
            waiting_for(&[second.clone(), first.clone()]).as_deref(),
            Some("db-20261202030000"),
            "the oldest"
        );
        assert_eq!(
            waiting_for(std::slice::from_ref(&second)).as_deref(),
            Some("db-20261203030000"),
            "created, not yet looked at"
        );
        for phase in ["Running", "Completed", "Failed"] {
            let started = backup(
                "db-20261202030000",
                Some("u1"),
                Some(phase),
                "2026-12-02T03:00:01Z",
            );
            assert_eq!(waiting_for(&[started]), None, "{phase}");
        }
        // Backups people asked for, and another cluster's, are not the
        // schedule's.
        let asked = backup(
            "db-20261202120000",
            None,
            Some("Pending"),
            "2026-12-02T12:00:00Z",
        );
        let other = backup(
            "db-20261202030000",
            Some("u2"),
            None,
            "2026-12-02T03:00:01Z",
        );
        assert_eq!(waiting_for(&[asked, other]), None);
    }

    #[test]
    fn a_malformed_schedule_is_named_in_the_error() {
        let error = parse("0 25 * * *").expect_err("hour 25");
        assert!(error.contains("`0 25 * * *`"), "{error}");
    }
}
