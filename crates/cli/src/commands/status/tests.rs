use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

fn cluster() -> PostgresCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": "db", "namespace": "shop",
                     "annotations": {"tusk.dev/fenced-instances": "[\"db-2\"]"}},
        "spec": {"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"}},
        "status": {
            "phase": "Degraded", "readyInstances": 1,
            "currentPrimary": "db-1", "targetPrimary": "db-1",
            "conditions": [{"type": "Ready", "status": "False", "reason": "InstancesNotReady",
                            "message": "db-2: not streaming", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "instances": [
                {"name": "db-2", "role": "replica", "ready": false, "lagBytes": 4096, "syncState": "async"},
                {"name": "db-1", "role": "primary", "ready": true, "timeline": 2, "lsn": "0/3000148"}
            ],
            "lastFailover": {"time": "2026-01-01T00:00:05Z", "from": "db-2", "to": "db-1",
                             "reason": "Failover", "lsnGapBytes": 0, "durationSeconds": 3.25},
            "backup": {"lastSuccessfulBackup": "b-1", "lastFailedArchive": "000000010000000000000003"}
        }
    }))
    .expect("a cluster")
}

fn pod(name: &str, ready: bool) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    }))
    .expect("a pod")
}

#[test]
fn the_report_takes_status_pods_and_fencing() {
    let report = report(&cluster(), &[pod("db-1", true)]);
    assert_eq!(report.phase.as_deref(), Some("Degraded"));
    assert_eq!((report.instances_declared, report.ready_instances), (2, 1));
    assert_eq!(report.primary.current.as_deref(), Some("db-1"));
    let [first, second] = report.instances.as_slice() else {
        panic!("two instances: {report:?}");
    };
    assert_eq!((first.pod_ready, first.fenced), (Some(true), false));
    assert_eq!((second.pod_ready, second.fenced), (None, true));
    assert_eq!(second.lag_bytes, Some(4096));
    let failover = report.last_failover.as_ref().expect("failover");
    assert_eq!(failover.time, "2026-01-01T00:00:05.000000Z");
}

#[test]
fn instances_are_listed_primary_first_then_by_serial() {
    let mut c = cluster();
    let status = c.status.as_mut().expect("status");
    status.current_primary = Some("db-10".into());
    status.instances = ["db-2", "db-10", "db-9"]
        .iter()
        .map(|n| tusk_api::v1alpha1::InstanceStatus {
            name: (*n).to_owned(),
            role: if *n == "db-10" { "primary" } else { "replica" }.to_owned(),
            ..Default::default()
        })
        .collect();
    let names: Vec<String> = report(&c, &[])
        .instances
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["db-10", "db-2", "db-9"]);
}

#[test]
fn the_json_document_has_stable_names() {
    let json = serde_json::to_value(report(&cluster(), &[])).expect("json");
    assert_eq!(json["primary"]["current"], "db-1");
    assert_eq!(json["conditions"][0]["type"], "Ready");
    assert_eq!(json["instances"][1]["lagBytes"], 4096);
    assert_eq!(json["instances"][1]["podReady"], serde_json::Value::Null);
    assert_eq!(json["lastFailover"]["lsnGapBytes"], 0);
    assert_eq!(json["backup"]["lastSuccessfulBackup"], "b-1");
    assert_eq!(json["lastRestoreVerification"], serde_json::Value::Null);
}

#[test]
fn the_text_shows_everything_on_one_screen() {
    let text = render(&report(
        &cluster(),
        &[pod("db-1", true), pod("db-2", false)],
    ));
    for expected in [
        "Cluster     shop/db",
        "Phase       Degraded  (1/2 instances ready)",
        "Primary     db-1 (target db-1)",
        "Ready  False   InstancesNotReady  db-2: not streaming",
        "db-1  primary  yes    ready      2         0/3000148  -       -      -",
        "db-2  replica  no     not ready  -         -          4096 B  async  fenced",
        "Last failover  2026-01-01T00:00:05.000000Z db-2 -> db-1 (Failover, gap 0 B, 3.2 s)",
        "archiving FAILING: 000000010000000000000003",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    assert!(text.lines().count() < 25, "one screen:\n{text}");
}

#[test]
fn a_failed_rehearsal_names_its_check() {
    let mut c = cluster();
    c.status.as_mut().expect("status").last_restore_verification =
        Some(tusk_api::v1alpha1::RestoreVerification {
            time: Time("2026-01-01T00:10:00Z".parse().expect("time")),
            backup_id: "20260101-000000F".into(),
            succeeded: false,
            duration_seconds: Some(40.0),
            recovery_point: None,
            failed_check: Some("restore".into()),
            message: Some("zst error: Data corruption detected".into()),
        });
    let text = render(&report(&c, &[]));
    assert!(
        text.contains("Rehearsal      FAILED (restore check) of 20260101-000000F at")
            && text.contains("zst error"),
        "{text}"
    );
}

#[test]
fn an_instance_waiting_for_a_node_says_why_in_the_schedulers_words() {
    let mut c = cluster();
    c.status.as_mut().expect("status").instances[0].unscheduled =
        Some(tusk_api::v1alpha1::Unscheduled {
            reason: tusk_api::v1alpha1::SchedulingReason::Unschedulable,
            message: "0/0 nodes are available".into(),
        });
    let report = report(&c, &[pod("db-1", true), pod("db-2", false)]);
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(
        json["instances"][1]["unscheduled"]["reason"],
        "Unschedulable"
    );
    let text = render(&report);
    for expected in [
        "db-2  replica  no     unschedulable",
        "db-2 waits for a node (Unschedulable): 0/0 nodes are available",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
}

#[test]
fn a_refused_spec_says_which_generation_is_kept() {
    let mut c = cluster();
    assert_eq!(report(&c, &[]).kept_spec, None, "no record: nothing said");
    let status = c.status.as_mut().expect("status");
    status.observed_generation = Some(5);
    status.last_valid_spec = Some(tusk_api::v1alpha1::LastValidSpec {
        generation: 4,
        spec: serde_json::json!({"instances": 2}),
    });
    let text = render(&report(&c, &[]));
    assert!(
        text.contains("Spec        generation 5 refused: kept as generation 4 declares it"),
        "{text}"
    );
    let status = c.status.as_mut().expect("status");
    status.last_valid_spec.as_mut().expect("record").generation = 5;
    assert_eq!(
        report(&c, &[]).kept_spec,
        None,
        "the declared spec is the valid one"
    );
}

#[test]
fn declared_roles_are_counted_and_a_failed_one_named_with_its_reason() {
    let mut c = cluster();
    c.status.as_mut().expect("status").roles = serde_json::from_value(serde_json::json!([
        {"name": "web", "state": "Reconciled"},
        {"name": "batch", "state": "Failed", "reason": "Secret batch-pw does not exist"}
    ]))
    .expect("roles");
    let text = render(&report(&c, &[]));
    assert!(
        text.contains(
            "Roles          1/2 as declared; batch FAILED: Secret batch-pw does not exist\n"
        ),
        "{text}"
    );
    assert!(!render(&report(&cluster(), &[])).contains("Roles"));
}
