use super::*;
use tusk_api::conditions::ConditionStatus;
use tusk_api::rehearsal::Check;

fn at(text: &str) -> Timestamp {
    text.parse().expect("a time")
}

fn hourly() -> Cron {
    schedule::parse("0 * * * *").expect("valid")
}

fn verified(time: &str, succeeded: bool) -> RestoreVerification {
    RestoreVerification {
        time: kube_time(at(time)),
        backup_id: "20261204-100000F".into(),
        succeeded,
        duration_seconds: Some(12.0),
        recovery_point: None,
        failed_check: (!succeeded).then(|| "amcheck".into()),
        message: Some("found".into()),
    }
}

fn input<'a>(
    cron: Option<&'a Cron>,
    last: Option<&'a RestoreVerification>,
    last_backup: Option<&'a Time>,
    pod: Option<&'a Observed>,
    now: &str,
) -> RehearsalInput<'a> {
    RehearsalInput {
        schedule: cron,
        requested: false,
        unable: None,
        last,
        last_backup,
        pod,
        now: at(now),
    }
}

#[test]
fn a_rehearsal_starts_at_the_first_slot_after_the_newest_backup_and_not_before() {
    let cron = hourly();
    let backup = kube_time(at("2026-12-04T10:20:00Z"));
    let before = decide(&input(
        Some(&cron),
        None,
        Some(&backup),
        None,
        "2026-12-04T10:59:00Z",
    ));
    assert!(!before.start);
    let due = decide(&input(
        Some(&cron),
        None,
        Some(&backup),
        None,
        "2026-12-04T11:00:05Z",
    ));
    assert!(due.start);
    assert_eq!(due.events[0].reason, "RehearsalStarted");
    // Once one finished at 11:03, not again until 12:00.
    let last = verified("2026-12-04T11:03:00Z", true);
    let after = decide(&input(
        Some(&cron),
        Some(&last),
        Some(&backup),
        None,
        "2026-12-04T11:30:00Z",
    ));
    assert_eq!(after, RehearsalPlan::default());
    let next = decide(&input(
        Some(&cron),
        Some(&last),
        Some(&backup),
        None,
        "2026-12-04T12:00:01Z",
    ));
    assert!(next.start);
}

#[test]
fn nothing_is_rehearsed_without_a_backup_and_a_request_then_says_why() {
    let cron = hourly();
    let quiet = decide(&input(
        Some(&cron),
        None,
        None,
        None,
        "2026-12-04T11:00:05Z",
    ));
    assert_eq!(quiet, RehearsalPlan::default());
    let mut asked = input(None, None, None, None, "2026-12-04T11:00:05Z");
    asked.requested = true;
    let refused = decide(&asked);
    assert!(!refused.start && refused.clear_request);
    assert!(
        refused.events[0].text.contains("no base backup"),
        "{:?}",
        refused.events
    );
    asked.unable = Some("spec.backup is not set".into());
    assert!(
        decide(&asked).events[0]
            .text
            .contains("spec.backup is not set")
    );
}

#[test]
fn a_request_starts_one_at_once_and_is_cleared() {
    let backup = kube_time(at("2026-12-04T10:20:00Z"));
    let mut asked = input(None, None, Some(&backup), None, "2026-12-04T10:21:00Z");
    asked.requested = true;
    let plan = decide(&asked);
    assert!(plan.start && plan.clear_request);
    // Not while one runs: the request waits for it to end.
    let running = Observed::Running {
        since: at("2026-12-04T10:20:30Z"),
    };
    asked.pod = Some(&running);
    let waiting = decide(&asked);
    assert!(!waiting.start && !waiting.clear_request);
    assert_eq!(waiting.look_again, Some(POLL));
}

#[test]
fn a_finished_pod_is_recorded_once_from_its_outcome_then_removed() {
    let outcome = Outcome {
        backup_id: Some("20261204-100000F".into()),
        backup: Some("db-20261204100000".into()),
        failed_check: Some(Check::Restore),
        message: "checksum mismatch in base/5/1259".into(),
        recovery_point: None,
        duration_seconds: 3.0,
    };
    let pod = Observed::Finished {
        exit_code: Some(0),
        message: Some(outcome.to_message()),
        at: at("2026-12-04T11:02:00Z"),
    };
    let plan = decide(&input(None, None, None, Some(&pod), "2026-12-04T11:02:05Z"));
    assert!(plan.remove);
    let record = plan.record.expect("recorded");
    assert!(!record.succeeded);
    assert_eq!(record.failed_check.as_deref(), Some("restore"));
    assert_eq!(record.backup_id, "20261204-100000F");
    assert_eq!(plan.events[0].reason, "RehearsalFailed");
    assert!(
        plan.events[0].text.contains("check restore failed"),
        "{:?}",
        plan.events
    );
    // Recorded already (the removal failed last time): only removed.
    let again = decide(&input(
        None,
        Some(&record),
        None,
        Some(&pod),
        "2026-12-04T11:02:30Z",
    ));
    assert!(again.remove && again.record.is_none() && again.events.is_empty());
}

#[test]
fn a_pod_that_wrote_no_outcome_or_hangs_is_a_failed_rehearsal() {
    let crashed = Observed::Finished {
        exit_code: Some(2),
        message: Some("cannot read PostgresCluster db: forbidden".into()),
        at: at("2026-12-04T11:02:00Z"),
    };
    let record = decide(&input(
        None,
        None,
        None,
        Some(&crashed),
        "2026-12-04T11:03:00Z",
    ))
    .record
    .expect("recorded");
    assert_eq!(record.failed_check.as_deref(), Some("rehearsal"));
    let message = record.message.unwrap_or_default();
    assert!(
        message.contains("exited with code 2") && message.contains("forbidden"),
        "{message}"
    );

    let hung = Observed::Running {
        since: at("2026-12-04T00:00:00Z"),
    };
    let plan = decide(&input(
        None,
        None,
        None,
        Some(&hung),
        "2026-12-04T12:00:01Z",
    ));
    assert!(plan.remove);
    assert!(
        plan.record
            .expect("failed")
            .message
            .unwrap_or_default()
            .contains("12h")
    );
}

#[test]
fn the_condition_waits_for_the_first_rehearsal_then_is_false_when_it_failed_or_is_stale() {
    let cron = hourly();
    let now = at("2026-12-04T12:30:00Z");
    let judged = |last: Option<&RestoreVerification>, declared: &str| {
        let (state, reason, message) = condition(&cron, last, at(declared), now);
        (state, reason, message)
    };
    // Declared an hour ago: the first may not have been due yet.
    let (state, reason, _) = judged(None, "2026-12-04T11:30:00Z");
    assert_eq!(
        (state, reason),
        (ConditionStatus::Unknown, "NotRehearsedYet")
    );
    // Declared long ago and never rehearsed.
    let (state, reason, _) = judged(None, "2026-12-03T00:00:00Z");
    assert_eq!((state, reason), (ConditionStatus::False, "NotRehearsed"));
    let failed = verified("2026-12-04T12:01:00Z", false);
    let (state, reason, message) = judged(Some(&failed), "2026-12-03T00:00:00Z");
    assert_eq!((state, reason), (ConditionStatus::False, "RehearsalFailed"));
    assert!(message.contains("amcheck"), "{message}");
    let fresh = verified("2026-12-04T11:01:00Z", true);
    let (state, reason, _) = judged(Some(&fresh), "2026-12-03T00:00:00Z");
    assert_eq!(
        (state, reason),
        (ConditionStatus::True, "RehearsalSucceeded")
    );
    // Two hourly periods and more since the last success.
    let old = verified("2026-12-04T10:01:00Z", true);
    let (state, reason, _) = judged(Some(&old), "2026-12-03T00:00:00Z");
    assert_eq!((state, reason), (ConditionStatus::False, "RehearsalStale"));
}
