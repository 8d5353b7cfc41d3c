//! Status conditions, set the way Kubernetes API conventions require (R5):
//! one condition per type, `lastTransitionTime` moves only when `status`
//! changes, and each records the generation it was computed from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The cluster serves: every declared instance is ready and replicating.
pub const READY: &str = "Ready";
/// The operator is moving the cluster towards its spec.
pub const PROGRESSING: &str = "Progressing";
/// Something failed; the reason says whether the operator retries.
pub const DEGRADED: &str = "Degraded";
/// A failover was needed but would violate the declared durability.
pub const FAILOVER_BLOCKED: &str = "FailoverBlocked";
/// WAL reaches the backup repository: True while the primary archives,
/// False (with the failing call in the message) while it cannot.
pub const CONTINUOUS_ARCHIVING: &str = "ContinuousArchiving";
/// Whether the primary serves; its transition time is when it stopped.
pub const PRIMARY_AVAILABLE: &str = "PrimaryAvailable";
/// Whether the newest base backup is recent for the declared schedule.
pub const LAST_BACKUP_RECENT: &str = "LastBackupRecent";
/// Whether the last restore rehearsal succeeded recently.
pub const RESTORE_REHEARSED: &str = "RestoreRehearsed";
/// The spec asks for something this operator version does not support (R30).
pub const UNSUPPORTED: &str = "Unsupported";
/// A declared major-version upgrade: False while it waits for what it
/// needs (a recent backup) or after it failed, naming the cause; True once
/// it completed. Absent while no upgrade was declared.
pub const MAJOR_UPGRADE: &str = "MajorUpgrade";

/// `status` of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// The string Kubernetes stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// What a caller wants a condition to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredCondition<'a> {
    pub type_: &'a str,
    pub status: ConditionStatus,
    /// CamelCase, machine-readable.
    pub reason: &'a str,
    /// For people.
    pub message: &'a str,
}

/// Sets `desired` in `conditions`, replacing any condition of the same type.
///
/// `lastTransitionTime` becomes `now` only when the condition is new or its
/// status changed; a new reason or message alone keeps the old time.
/// Returns whether anything changed, so callers can skip a status write.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    desired: &DesiredCondition<'_>,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let status = desired.status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == desired.type_) {
        Some(existing) => {
            let before = existing.clone();
            if existing.status != status {
                existing.status = status.to_owned();
                existing.last_transition_time = now.clone();
            }
            existing.reason = desired.reason.to_owned();
            existing.message = desired.message.to_owned();
            existing.observed_generation = observed_generation;
            *existing != before
        }
        None => {
            conditions.push(Condition {
                type_: desired.type_.to_owned(),
                status: status.to_owned(),
                reason: desired.reason.to_owned(),
                message: desired.message.to_owned(),
                observed_generation,
                last_transition_time: now.clone(),
            });
            true
        }
    }
}

/// Removes the condition of `type_`; returns whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_`, if present.
pub fn find_condition<'c>(conditions: &'c [Condition], type_: &str) -> Option<&'c Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid timestamp"))
    }

    fn ready(status: ConditionStatus, reason: &'static str) -> DesiredCondition<'static> {
        DesiredCondition {
            type_: READY,
            status,
            reason,
            message: "all instances ready",
        }
    }

    #[test]
    fn a_new_condition_is_added_with_the_current_time() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            &ready(ConditionStatus::True, "AllReady"),
            Some(3),
            &at(100)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(100));
        assert_eq!(conditions[0].observed_generation, Some(3));
    }

    #[test]
    fn transition_time_stays_when_only_the_reason_changes() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            &ready(ConditionStatus::False, "Creating"),
            Some(1),
            &at(100),
        );
        let changed = set_condition(
            &mut conditions,
            &ready(ConditionStatus::False, "Waiting"),
            Some(2),
            &at(200),
        );
        assert!(changed);
        assert_eq!(conditions[0].reason, "Waiting");
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn transition_time_moves_when_the_status_changes() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            &ready(ConditionStatus::False, "Creating"),
            Some(1),
            &at(100),
        );
        set_condition(
            &mut conditions,
            &ready(ConditionStatus::True, "AllReady"),
            Some(1),
            &at(300),
        );
        assert_eq!(conditions.len(), 1, "one condition per type");
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, at(300));
    }

    #[test]
    fn setting_the_same_condition_again_changes_nothing() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            &ready(ConditionStatus::True, "AllReady"),
            Some(1),
            &at(100),
        );
        let changed = set_condition(
            &mut conditions,
            &ready(ConditionStatus::True, "AllReady"),
            Some(1),
            &at(500),
        );
        assert!(!changed);
        assert_eq!(conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn conditions_of_other_types_are_left_alone() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            &ready(ConditionStatus::True, "AllReady"),
            Some(1),
            &at(100),
        );
        let degraded = DesiredCondition {
            type_: DEGRADED,
            status: ConditionStatus::False,
            reason: "AsExpected",
            message: "",
        };
        set_condition(&mut conditions, &degraded, Some(1), &at(200));
        assert_eq!(conditions.len(), 2);
        assert!(is_true(&conditions, READY));
        assert!(!is_true(&conditions, DEGRADED));
        assert!(remove_condition(&mut conditions, DEGRADED));
        assert!(find_condition(&conditions, DEGRADED).is_none());
        assert!(!remove_condition(&mut conditions, DEGRADED));
    }
}
