use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use tusk_api::v1alpha1::{PostgresClusterStatus, RecoveryPoint};

use super::*;
use crate::config::OperatorConfig;
use crate::error::ErrorCategory;
use crate::status::{StatusInput, compose};
use crate::validate::tests::{cluster, three_instances};

const NOW: &str = "2026-01-01T10:01:00Z";

pub(crate) fn now() -> Timestamp {
    NOW.parse().expect("a time")
}

pub(crate) fn spec(durability: &str, synchronous: bool) -> Value {
    let mut spec = three_instances();
    spec["failover"] = json!({"delaySeconds": 5, "dataDurability": durability});
    if synchronous {
        spec["replication"] = json!({"synchronous": {"mode": "first", "number": 1}});
    }
    spec
}

pub(crate) fn with_status(spec: Value, status: &PostgresClusterStatus) -> PostgresCluster {
    let mut cluster = cluster(spec);
    cluster.status = Some(status.clone());
    cluster
}

pub(crate) fn pod(name: &str, ready: bool) -> Pod {
    pod_since(name, ready, "2026-01-01T10:00:00Z")
}

/// A pod whose Ready condition last changed at `since`.
fn pod_since(name: &str, ready: bool, since: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"podIP": "10.0.0.1", "conditions": [{
            "type": "Ready", "status": if ready { "True" } else { "False" },
            "lastTransitionTime": since,
        }]},
    }))
    .expect("a pod")
}

pub(crate) fn report(name: &str, role: &str, received: &str) -> (String, InstanceReport) {
    let report = serde_json::from_value(json!({
        "name": name, "role": role, "phase": "running", "ready": role == "primary",
        "fenced": false, "timeline": 1, "receivedLsn": received, "replayedLsn": received,
    }))
    .expect("a report");
    (name.to_owned(), report)
}

/// The primary failed a minute ago; its standbys still answer.
pub(crate) fn primary_failed() -> Observed {
    let mut observed = Observed::default();
    observed.children.pods = vec![
        pod("orders-1", false),
        pod("orders-2", true),
        pod("orders-3", true),
    ];
    observed.reports = BTreeMap::from([
        report("orders-2", "replica", "0/4FFFFF0"),
        report("orders-3", "replica", "0/4FFFFFF"),
    ]);
    observed
}

/// The status while orders-1 served, synchronously to orders-2.
pub(crate) fn serving() -> PostgresClusterStatus {
    serde_json::from_value(json!({
        "phase": "Ready",
        "targetPrimary": "orders-1",
        "currentPrimary": "orders-1",
        "latestInstanceSerial": 3,
        "instances": [
            {"name": "orders-1", "role": "primary", "ready": true, "timeline": 1, "lsn": "0/5000000"},
            {"name": "orders-2", "role": "replica", "ready": true, "timeline": 1, "lsn": "0/4000000", "syncState": "sync"},
            {"name": "orders-3", "role": "replica", "ready": true, "timeline": 1, "lsn": "0/4000000", "syncState": "potential"},
        ],
        "conditions": [{
            "type": "PrimaryAvailable", "status": "False", "reason": "PrimaryUnavailable",
            "message": "", "lastTransitionTime": "2026-01-01T10:00:00Z",
        }],
    }))
    .expect("a status")
}

fn judged(spec: Value, status: &PostgresClusterStatus) -> FailoverCheck {
    let cluster = with_status(spec, status);
    let valid = crate::validate::validate(&cluster, &OperatorConfig::default()).expect("valid");
    judge(&cluster, &valid, &primary_failed(), now()).0
}

fn promoted(check: &FailoverCheck) -> Option<(&str, i64)> {
    check
        .record
        .as_ref()
        .map(|r| (r.to.as_str(), r.lsn_gap_bytes))
}

/// Durability, synchronous replication declared; the promotion and its
/// gap, or the blocked candidate and its gap.
type Case = (
    &'static str,
    bool,
    Option<(&'static str, i64)>,
    Option<(&'static str, u64)>,
);

#[test]
fn a_failed_primary_is_replaced_from_its_last_known_position() {
    // (durability, synchronous, promoted and gap, blocked)
    let cases: [Case; 3] = [
        // orders-2 confirmed every commit: nothing is lost.
        ("required", true, Some(("orders-3", 0)), None),
        // Without a synchronous standby, the gap runs from the primary's
        // last known position 0/5000000.
        ("preferred", false, Some(("orders-3", 1)), None),
        ("required", false, None, Some(("orders-3", 1))),
    ];
    for (durability, synchronous, expected, blocked) in cases {
        let check = judged(spec(durability, synchronous), &serving());
        assert_eq!(promoted(&check), expected, "{durability} {synchronous}");
        assert_eq!(
            check
                .blocked
                .as_ref()
                .map(|b| (b.to.as_str(), u64::try_from(b.lsn_gap_bytes).unwrap_or(0))),
            blocked
        );
        assert_eq!(check.primary_available, Some(false));
    }
}

#[test]
fn a_failover_after_an_invalid_edit_still_uses_the_last_known_positions() {
    // An invalid edit while the primary is silent: the status written for
    // it must keep the positions and the synchronous set...
    let mut invalid = spec("required", true);
    invalid["postgres"]["parameters"] = json!({"wal_level": "minimal"});
    let edited = with_status(invalid, &serving());
    let observed = primary_failed();
    let failure =
        crate::validate::validate(&edited, &OperatorConfig::default()).expect_err("invalid");
    let kept = StatusInput {
        failure: Some((ErrorCategory::InvalidSpec, failure.to_string())),
        ..StatusInput::unplanned(
            &edited,
            &observed.children.pods,
            3,
            &observed.reports,
            Time(now()),
        )
    };
    let after_edit = compose(&kept);
    let positions: Vec<(&str, Option<&str>, Option<&str>)> = after_edit
        .instances
        .iter()
        .map(|i| (i.name.as_str(), i.lsn.as_deref(), i.sync_state.as_deref()))
        .collect();
    assert_eq!(positions[0], ("orders-1", Some("0/5000000"), None));
    assert_eq!(positions[1].2, Some("sync"));
    // ...so once the spec is fixed, the failover proves no acknowledged
    // commit is lost instead of blocking for want of a synchronous set.
    let check = judged(spec("required", true), &after_edit);
    assert_eq!(promoted(&check), Some(("orders-3", 0)));
    assert_eq!(
        check.record.and_then(|r| r.recovery_point),
        Some(RecoveryPoint {
            lsn: "0/4FFFFFF".into(),
            time: None
        })
    );
}

#[test]
fn the_failover_waits_for_its_delay_and_a_serving_primary_is_left_alone() {
    let mut recent = serving();
    recent.conditions[0].last_transition_time =
        Time("2026-01-01T10:00:58Z".parse().expect("a time"));
    let cluster = with_status(spec("preferred", false), &recent);
    let valid = crate::validate::validate(&cluster, &OperatorConfig::default()).expect("valid");
    let mut observed = primary_failed();
    observed.children.pods[0] = pod_since("orders-1", false, "2026-01-01T10:00:58Z");
    let (check, note) = judge(&cluster, &valid, &observed, now());
    assert_eq!((promoted(&check), note), (None, vec![]));
    assert!(check.delay_left.is_some_and(|left| left.as_secs() >= 3));

    let cluster = with_status(spec("preferred", false), &serving());
    let valid = crate::validate::validate(&cluster, &OperatorConfig::default()).expect("valid");
    let mut healthy = primary_failed();
    healthy.children.pods[0] = pod("orders-1", true);
    healthy
        .reports
        .extend([report("orders-1", "primary", "0/5000000")]);
    let (check, note) = judge(&cluster, &valid, &healthy, now());
    assert_eq!(check.primary_available, Some(true));
    assert!(note.is_empty());
}

fn annotated(
    spec: Value,
    status: &PostgresClusterStatus,
    approval: Option<&str>,
) -> PostgresCluster {
    let mut cluster = with_status(spec, status);
    if let Some(approval) = approval {
        cluster.metadata.annotations =
            Some([(labels::APPROVE_DATA_LOSS.to_owned(), approval.to_owned())].into());
    }
    cluster
}

fn judged_with(cluster: &PostgresCluster, observed: &Observed) -> (FailoverCheck, Vec<Note>) {
    let valid = crate::validate::validate(cluster, &OperatorConfig::default()).expect("valid");
    judge(cluster, &valid, observed, now())
}

fn reasons(notes: &[Note]) -> Vec<&str> {
    notes.iter().map(|n| n.reason.as_str()).collect()
}

#[test]
fn only_an_approval_quoting_the_blocked_decision_promotes() {
    // No synchronous standby: required durability blocks.
    let (first, _) = judged_with(
        &annotated(spec("required", false), &serving(), None),
        &primary_failed(),
    );
    let decision = first.blocked.expect("blocked");
    assert_eq!(decision.to, "orders-3");
    let mut blocked = serving();
    blocked.failover = Some(tusk_api::v1alpha1::FailoverStatus {
        blocked: Some(decision.clone()),
    });
    // (approval, promoted with reason, events, annotation removed)
    let stale = "0123456789";
    let cases = [
        (None, None, vec![], false),
        (
            Some(decision.id.as_str()),
            Some("ApprovedFailover"),
            vec!["ApprovedFailover"],
            true,
        ),
        (Some(stale), None, vec![APPROVAL_REJECTED], true),
        (Some("orders-3"), None, vec![APPROVAL_REJECTED], true),
        (Some("true"), None, vec![APPROVAL_REJECTED], true),
    ];
    for (approval, reason, events, cleared) in cases {
        let cluster = annotated(spec("required", false), &blocked, approval);
        let (check, notes) = judged_with(&cluster, &primary_failed());
        assert_eq!(
            check.record.as_ref().map(|r| r.reason.as_str()),
            reason,
            "{approval:?}"
        );
        assert_eq!(reasons(&notes), events, "{approval:?}");
        assert_eq!(check.clear_approval, cleared, "{approval:?}");
        if reason.is_none() {
            let still = check.blocked.expect("still blocked");
            assert_eq!(
                still.id, decision.id,
                "the same decision keeps its identity"
            );
            if let Some(rejected) = approval {
                assert_eq!(still.rejected_approval.as_deref(), Some(rejected));
                assert!(
                    notes[0].text.contains(&format!("={}", decision.id)),
                    "{}",
                    notes[0].text
                );
            }
        }
    }
    // Preferred durability needs no approval, and ignores one.
    let cluster = annotated(spec("preferred", false), &serving(), Some(stale));
    let (check, notes) = judged_with(&cluster, &primary_failed());
    assert_eq!(check.record.map(|r| r.reason).as_deref(), Some("Failover"));
    assert_eq!(reasons(&notes), ["Failover"]);
    assert!(!check.clear_approval);
}

#[test]
fn a_blocked_decision_keeps_its_identity_when_the_failure_is_dated_later() {
    let (first, _) = judged_with(
        &annotated(spec("required", false), &serving(), None),
        &primary_failed(),
    );
    let decision = first.blocked.expect("blocked");
    // A later pass sees the failure dated within the delay (a condition
    // written with a whole-second time just now): it neither waits again
    // nor records a new decision.
    let mut blocked = serving();
    blocked.conditions[0].last_transition_time = Time(now());
    blocked.failover = Some(tusk_api::v1alpha1::FailoverStatus {
        blocked: Some(decision.clone()),
    });
    let mut observed = primary_failed();
    observed.children.pods[0] = pod_since("orders-1", false, NOW);
    let later = now() + std::time::Duration::from_secs(1);
    let cluster = annotated(spec("required", false), &blocked, None);
    let valid = crate::validate::validate(&cluster, &OperatorConfig::default()).expect("valid");
    let (check, _) = judge(&cluster, &valid, &observed, later);
    assert_eq!(check.delay_left, None, "{check:?}");
    assert_eq!(check.blocked.map(|b| b.id), Some(decision.id));
}

/// orders-1 failed; orders-3 was chosen at `decided` and does not answer.
fn promoting(decided: &str) -> (PostgresClusterStatus, Observed) {
    let mut status = serving();
    status.target_primary = Some("orders-3".into());
    status.current_primary = None;
    status.last_failover = serde_json::from_value(json!({
        "time": decided, "from": "orders-1", "to": "orders-3", "reason": "Failover",
        "lsnGapBytes": 0, "durationSeconds": 6.0,
    }))
    .expect("a record");
    let mut observed = primary_failed();
    observed.reports.remove("orders-3");
    observed.children.pods[2] = pod("orders-3", false);
    (status, observed)
}

fn deleting(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(now()));
    pod
}

#[test]
fn a_promotion_that_does_not_complete_in_time_is_abandoned_for_the_next_best() {
    // Decided 10 s ago: it has 20 s more.
    let (status, observed) = promoting("2026-01-01T10:00:50Z");
    let (check, notes) = judged_with(&with_status(spec("preferred", false), &status), &observed);
    assert_eq!((promoted(&check), notes), (None, vec![]));
    assert_eq!(check.delay_left.map(|d| d.as_secs()), Some(20));
    // Decided 30 s ago: orders-2 is chosen, orders-3 never again.
    let (status, observed) = promoting("2026-01-01T10:00:30Z");
    let (check, notes) = judged_with(&with_status(spec("preferred", false), &status), &observed);
    let record = check.record.expect("decided again");
    assert_eq!(
        (record.from.as_str(), record.to.as_str()),
        ("orders-1", "orders-2")
    );
    assert_eq!(record.abandoned, ["orders-3"]);
    assert_eq!(
        record.duration_seconds,
        Some(36.0),
        "from the primary's failure"
    );
    assert_eq!(reasons(&notes), [PROMOTION_ABANDONED, "Failover"]);
    assert!(
        notes[0].text.contains("orders-3 did not report serving"),
        "{}",
        notes[0].text
    );
    // Its pod being deleted: abandoned at once.
    let (status, mut observed) = promoting("2026-01-01T10:00:59Z");
    observed.children.pods[2] = deleting(pod("orders-3", false));
    let (check, _) = judged_with(&with_status(spec("preferred", false), &status), &observed);
    assert_eq!(promoted(&check).map(|(to, _)| to), Some("orders-2"));
    // Nothing else to choose: it stalls, and says why.
    let (mut status, mut observed) = promoting("2026-01-01T10:00:00Z");
    if let Some(record) = status.last_failover.as_mut() {
        record.abandoned = vec!["orders-2".into()];
    }
    observed.reports.remove("orders-2");
    let (check, notes) = judged_with(&with_status(spec("preferred", false), &status), &observed);
    assert_eq!((promoted(&check), notes), (None, vec![]));
    assert!(
        check
            .stalled
            .is_some_and(|why| why.contains("no other standby"))
    );
}

#[test]
fn a_pod_being_deleted_is_never_a_candidate() {
    let mut observed = primary_failed();
    // orders-3 is the most advanced, but its pod is going away.
    observed.children.pods[2] = deleting(pod("orders-3", true));
    let (check, _) = judged_with(
        &with_status(spec("preferred", false), &serving()),
        &observed,
    );
    assert_eq!(promoted(&check).map(|(to, _)| to), Some("orders-2"));
}

#[test]
fn a_primary_that_still_answers_gives_the_freshest_synchronous_flush_position() {
    // orders-1's pod is not ready, but its manager answers: it last saw
    // orders-2 (sync) flush up to 0/4FFFFFF, beyond what orders-2 reports
    // having received now. Required durability does not trust the listing.
    let mut observed = primary_failed();
    let mut primary = report("orders-1", "primary", "0/5000000").1;
    primary.ready = false;
    primary.current_lsn = Some("0/5000000".into());
    primary.standbys = serde_json::from_value(json!([
        {"name": "orders-2", "state": "streaming", "syncState": "sync", "flushLsn": "0/4FFFFFF"},
    ]))
    .expect("standbys");
    observed.reports.insert("orders-1".into(), primary);
    observed.reports.remove("orders-3");
    let (check, _) = judged_with(&with_status(spec("required", true), &serving()), &observed);
    assert!(check.record.is_none());
    assert_eq!(check.blocked.map(|b| b.to).as_deref(), Some("orders-2"));
}

#[test]
fn a_stale_synchronous_listing_proves_nothing_once_a_listed_standby_is_lost() {
    // The status last recorded orders-2 as the synchronous standby
    // (FIRST 1) or the only quorum member (ANY 1: orders-3 had not yet
    // connected). Since then orders-3 may have become synchronous and
    // confirmed the last commits alone; it is lost with the primary.
    // orders-2 answers, but cannot prove it holds those commits.
    for (mode, orders_2, orders_3) in [
        ("first", "sync", Some("potential")),
        ("any", "quorum", None),
    ] {
        let mut declared = spec("required", true);
        declared["replication"]["synchronous"]["mode"] = json!(mode);
        let mut status = serving();
        status.instances[1].sync_state = Some(orders_2.into());
        status.instances[2].sync_state = orders_3.map(str::to_owned);
        let mut observed = primary_failed();
        observed.children.pods[2] = pod("orders-3", false);
        observed.reports.remove("orders-3");
        let (check, _) = judged_with(&with_status(declared.clone(), &status), &observed);
        assert_eq!(promoted(&check), None, "{mode}: {check:?}");
        assert_eq!(
            check.blocked.map(|b| b.to).as_deref(),
            Some("orders-2"),
            "{mode}"
        );
        // orders-3 answers with its final position: the proof holds.
        let (check, _) = judged_with(&with_status(declared, &status), &primary_failed());
        assert_eq!(promoted(&check), Some(("orders-3", 0)), "{mode}");
    }
}

#[test]
fn a_synchronous_number_raised_in_flight_is_proven_under_the_old_one_too() {
    // ANY 1 recorded in status.lastValidSpec (what orders-1's manager
    // runs), ANY 2 declared in this very pass. Under ANY 2 of two, one
    // answering standby would do; under ANY 1, which the primary may
    // still have run, both must answer.
    let mut told = spec("required", true);
    told["replication"]["synchronous"] = json!({"mode": "any", "number": 1});
    let mut raised = told.clone();
    raised["replication"]["synchronous"]["number"] = json!(2);
    let mut status = serving();
    status.instances[1].sync_state = Some("quorum".into());
    status.instances[2].sync_state = Some("quorum".into());
    let mut observed = primary_failed();
    observed.reports.remove("orders-3");
    // (the spec the primary was told, blocked)
    for (recorded, blocked) in [(None, false), (Some(told), true)] {
        let mut status = status.clone();
        status.last_valid_spec = recorded.map(|spec| tusk_api::v1alpha1::LastValidSpec {
            generation: 1,
            spec,
        });
        let (check, _) = judged_with(&with_status(raised.clone(), &status), &observed);
        assert_eq!(check.blocked.is_some(), blocked, "{check:?}");
        assert_eq!(check.record.is_some(), !blocked, "{check:?}");
    }
}

#[test]
fn a_switchover_starts_only_while_the_primary_serves() {
    let serving_check = FailoverCheck {
        primary_available: Some(true),
        ..FailoverCheck::default()
    };
    let mut reports = BTreeMap::from([report("orders-2", "replica", "0/5000000")]);
    for standby in reports.values_mut() {
        standby.ready = true;
    }
    let cases = [
        (
            "orders-2",
            &serving_check,
            Some("orders-2"),
            Some("Switchover"),
        ),
        ("orders-1", &serving_check, None, None),
        ("orders-2", &unavailable(), None, Some("SwitchoverRefused")),
        ("orders-9", &serving_check, None, Some("SwitchoverRefused")),
    ];
    for (requested, check, to, reason) in cases {
        let observed = Observed {
            reports: reports.clone(),
            ..Observed::default()
        };
        let (record, note) = switchover(requested, "orders-1", check, &observed, now());
        assert_eq!(record.map(|r| r.to).as_deref(), to, "{requested}");
        assert_eq!(note.map(|n| n.reason).as_deref(), reason, "{requested}");
    }
}

#[test]
fn an_abandoned_standby_holding_the_lease_does_not_stall_the_next_choice() {
    use crate::primacy::LeaseState;
    // orders-3 was chosen 30 s ago, took the lease over, and renewed it a
    // moment ago while its promotion hangs: it may renew for as long as
    // that lasts. orders-2 is chosen at once, with no version to take over:
    // its manager takes the lease only once orders-3 lets go of it (or it
    // stands unrenewed for its whole duration).
    let (status, mut observed) = promoting("2026-01-01T10:00:30Z");
    let held = |holder: &str, unchanged: u64| LeaseState::Held {
        holder: holder.into(),
        version: "42".into(),
        duration: std::time::Duration::from_secs(5),
        unchanged_for: std::time::Duration::from_secs(unchanged),
    };
    observed.lease = Some(held("orders-3", 1));
    let cluster = with_status(spec("preferred", false), &status);
    // While its manager does not answer, or reports serving as primary,
    // it may have acknowledged commits: the choice waits for its lease.
    let (check, notes) = judged_with(&cluster, &observed);
    assert_eq!((promoted(&check), notes), (None, vec![]));
    assert_eq!(check.delay_left.map(|d| d.as_secs()), Some(4));
    observed.reports.insert(
        "orders-3".into(),
        report("orders-3", "primary", "0/5000000").1,
    );
    let (check, _) = judged_with(&cluster, &observed);
    assert_eq!(promoted(&check), None, "{check:?}");
    // Its manager answers: still in recovery, the promotion hanging.
    let mut stuck = report("orders-3", "replica", "0/4FFFFFF").1;
    stuck.phase = tusk_api::instance::InstancePhase::Promoting;
    observed.reports.insert("orders-3".into(), stuck);
    let (check, _) = judged_with(&cluster, &observed);
    assert_eq!(promoted(&check).map(|(to, _)| to), Some("orders-2"));
    assert_eq!(check.lease_takeover, None, "no version handed over");
    assert_eq!(check.delay_left, None);
    // Unrenewed for its whole duration: the version is handed over.
    observed.lease = Some(held("orders-3", 5));
    let (check, _) = judged_with(&cluster, &observed);
    assert_eq!(promoted(&check).map(|(to, _)| to), Some("orders-2"));
    assert_eq!(check.lease_takeover.as_deref(), Some("42"));
    // Held by the failed primary itself: the choice waits for it.
    observed.lease = Some(held("orders-1", 1));
    let (check, notes) = judged_with(&cluster, &observed);
    assert_eq!((promoted(&check), notes), (None, vec![]));
    assert_eq!(check.delay_left.map(|d| d.as_secs()), Some(4));
}
