//! `spec.backup.schedule`: a five-field cron expression in UTC (or
//! `@hourly`, `@daily`, `@weekly`, `@monthly`), read with `croner`.
//!
//! A slot that passed creates one PostgresBackup named after the slot
//! (`<cluster>-<YYYYMMDDhhmmss>`), so a repeated pass creates the same
//! object, never a second one. Slots missed while the operator was down
//! make one backup, at the newest missed slot, not a burst.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use k8s_openapi::jiff::Timestamp;

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

    #[test]
    fn a_malformed_schedule_is_named_in_the_error() {
        let error = parse("0 25 * * *").expect_err("hour 25");
        assert!(error.contains("`0 25 * * *`"), "{error}");
    }
}
