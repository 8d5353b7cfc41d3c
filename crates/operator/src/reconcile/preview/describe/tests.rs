use std::time::Duration;

use serde_json::json;

use super::*;
use crate::config::OperatorConfig;
use crate::validate::tests::{cluster, three_instances};

fn valid() -> ValidatedCluster {
    crate::validate::validate(&cluster(three_instances()), &OperatorConfig::default())
        .expect("valid")
}

#[test]
fn a_child_is_created_when_missing_updated_when_it_drifted_and_left_when_as_set() {
    let desired = builders::rw_service(&valid());
    let created = compared(None, &desired).expect("a step");
    assert_eq!(
        (created.action, created.object.as_str()),
        ("create", "Service/orders-rw")
    );
    assert_eq!(compared(Some(&desired), &desired), None);
    let mut edited = desired.clone();
    if let Some(spec) = edited.spec.as_mut() {
        spec.selector = Some([("app".to_owned(), "other".to_owned())].into());
    }
    let updated = compared(Some(&edited), &desired).expect("a step");
    assert_eq!(
        (updated.action, updated.why.as_str()),
        ("update", "differs from what Tusk sets (restored)")
    );
}

#[test]
fn the_primary_check_says_what_it_promotes_or_why_it_waits() {
    assert_eq!(
        primary(&FailoverCheck::default()),
        None,
        "a serving primary"
    );
    let waiting = FailoverCheck {
        primary_available: Some(false),
        delay_left: Some(Duration::from_millis(2500)),
        ..FailoverCheck::default()
    };
    assert_eq!(
        primary(&waiting).map(|s| s.why),
        Some(
            "the primary is unavailable: a failover is decided in 2.5 s unless it recovers".into()
        )
    );
    let blocked: tusk_api::v1alpha1::BlockedFailover = serde_json::from_value(json!({
        "id": "f-1", "from": "db-1", "to": "db-2", "lsnGapBytes": 8192,
        "since": "2026-12-05T03:00:00Z"}))
    .expect("blocked");
    let step = primary(&FailoverCheck {
        blocked: Some(blocked),
        ..waiting.clone()
    })
    .expect("a step");
    assert_eq!((step.action, step.object.as_str()), ("wait", "Pod/db-2"));
    assert!(
        step.why.contains("up to 8192 bytes") && step.why.contains("(f-1)"),
        "{}",
        step.why
    );
    let record: tusk_api::v1alpha1::FailoverRecord = serde_json::from_value(json!({
        "time": "2026-12-05T03:00:00Z", "from": "db-1", "to": "db-3",
        "reason": "Failover", "lsnGapBytes": 0}))
    .expect("record");
    let check = FailoverCheck {
        record: Some(record),
        lease_takeover: Some("42".into()),
        ..waiting
    };
    let step = primary(&check).expect("a step");
    assert_eq!((step.action, step.object.as_str()), ("promote", "Pod/db-3"));
    assert_eq!(
        step.why,
        "Failover from db-1: 0 bytes of WAL behind what was last seen of db-1; \
         it takes the primary lease over at version 42"
    );
}

#[test]
fn only_the_status_fields_that_change_are_listed() {
    let old: PostgresClusterStatus = serde_json::from_value(json!({
        "phase": "Ready", "currentPrimary": "db-1", "targetPrimary": "db-1", "readyInstances": 3,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "all ready",
             "lastTransitionTime": "2026-12-05T03:00:00Z"},
            {"type": "Degraded", "status": "False", "reason": "AsDeclared", "message": "",
             "lastTransitionTime": "2026-12-05T03:00:00Z"}]}))
    .expect("old");
    let mut new = old.clone();
    new.phase = Some(tusk_api::v1alpha1::ClusterPhase::Scaling);
    new.conditions[0].status = "False".into();
    new.conditions[0].reason = "Scaling".into();
    new.conditions[0].message = "2 of 3 ready".into();
    let changes = status_changes(Some(&old), &new);
    let fields: Vec<(&str, &str, &str)> = changes
        .iter()
        .map(|c| (c.field.as_str(), c.from.as_str(), c.to.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("phase", "Ready", "Scaling"),
            (
                "condition Ready",
                "True (Ready): all ready",
                "False (Scaling): 2 of 3 ready"
            ),
        ]
    );
    assert!(status_changes(Some(&old), &old).is_empty());
    let mut recorded = old.clone();
    recorded.last_valid_spec = Some(tusk_api::v1alpha1::LastValidSpec {
        generation: 4,
        spec: json!({"instances": 3}),
    });
    let changes = status_changes(Some(&old), &recorded);
    assert_eq!(
        changes
            .iter()
            .map(|c| (c.field.as_str(), c.from.as_str(), c.to.as_str()))
            .collect::<Vec<_>>(),
        [("lastValidSpec", "none", "generation 4")],
        "a newly valid spec is recorded"
    );
    let first = status_changes(None, &old);
    assert_eq!(first[0].field, "phase");
    assert_eq!(first[0].from, "none");
}

#[test]
fn a_declared_login_role_s_secret_is_in_the_plan_until_it_exists() {
    let mut spec = three_instances();
    spec["roles"] = json!([{"name": "web_app", "login": true}, {"name": "readers"}]);
    let valid =
        crate::validate::validate(&cluster(spec), &OperatorConfig::default()).expect("valid");
    let steps = children(&valid, &Children::default(), &[]);
    let roles: Vec<(&str, &str)> = steps
        .iter()
        .filter(|s| s.why.contains("declared role"))
        .map(|s| (s.action, s.object.as_str()))
        .collect();
    assert_eq!(roles, [("create", "Secret/orders-role-web-app")]);
}
