//! Errors and restarts: back-off on API errors, leader election, a restarted
//! operator, an object that does not decode (R10-R12).

use crate::support::*;

#[tokio::test]
async fn api_errors_are_retried_with_back_off_and_the_cluster_recovers() {
    let h = sandbox(true).await;
    let faults = h.sandbox.faults().clone();
    faults.fail_next(3, "patch", "services", Failure::Internal);
    faults.fail_next(
        2,
        "create",
        "secrets",
        Failure::TooManyRequests {
            retry_after_seconds: 1,
        },
    );
    let operator = Operator::start(&h.client, None);
    create(&h.client, "flaky", small()).await;
    wait_for("every child despite injected errors", || {
        children_exist(&h.client, "flaky")
    })
    .await;
    let reconciles_with_errors = faults.count("list", "pods");
    assert!(
        reconciles_with_errors <= 30,
        "back-off must bound retries: {reconciles_with_errors} reconciles"
    );
    operator.stop().await;
}

#[tokio::test]
async fn two_operators_elect_one_leader_and_the_other_takes_over() {
    let h = sandbox(true).await;
    let leadership = |identity: &str| Leadership {
        namespace: NS.to_owned(),
        identity: identity.to_owned(),
        timing: LeaseTiming {
            duration_seconds: 3,
            grace_seconds: 1,
        },
    };
    let first = Operator::start(&h.client, Some(leadership("first")));
    let second = Operator::start(&h.client, Some(leadership("second")));
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), NS);
    let holder = || async {
        leases
            .get_opt(tusk_operator::leader::LEASE_NAME)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
    };
    wait_for("a leader", || async { holder().await.is_some() }).await;
    let leader = holder().await.expect("leader");
    create(&h.client, "ha", small()).await;
    wait_for("the leader to reconcile", || {
        children_exist(&h.client, "ha")
    })
    .await;

    let (leader_op, follower) = if leader == "first" {
        (first, second)
    } else {
        (second, first)
    };
    leader_op.stop().await;
    wait_for("the other replica to take the Lease", || async {
        holder().await.is_some_and(|h| h != leader)
    })
    .await;
    // The new leader reconciles: a deleted child comes back.
    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    services
        .delete("ha-r", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the new leader to restore -r", || async {
        get::<Service>(&h.client, "ha-r").await.is_some()
    })
    .await;
    follower.stop().await;
}

#[tokio::test]
async fn a_restarted_operator_resumes_without_duplicates() {
    let h = sandbox(true).await;
    let first = Operator::start(&h.client, None);
    let mut spec = small();
    spec["instances"] = json!(3);
    create(&h.client, "resume", spec).await;
    wait_for("the first instance", || async {
        get::<Pod>(&h.client, "resume-1").await.is_some()
    })
    .await;
    first.stop().await;
    let second = Operator::start(&h.client, None);
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_for("status after the restart", || async {
        status_phase(&h.client, "resume").await.is_some()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), NS);
    let names: Vec<String> = pods
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    // The first instance is not ready (no kubelet), so no replica may exist yet.
    assert_eq!(names, ["resume-1"]);
    let live: PostgresCluster = get(&h.client, "resume").await.expect("cluster");
    assert_eq!(live.status.expect("status").latest_instance_serial, 1);
    second.stop().await;
}

#[tokio::test]
async fn a_cluster_that_does_not_decode_is_reported_and_does_not_stop_the_others() {
    let h = sandbox_with(admit_any_spec).await;
    let resource = kube::api::ApiResource::erase::<PostgresCluster>(&());
    let dynamic: Api<kube::api::DynamicObject> =
        Api::namespaced_with(h.client.clone(), NS, &resource);
    let mut broken = kube::api::DynamicObject::new("broken", &resource).within(NS);
    broken.data = json!({"spec": {"instances": "three", "storage": {"size": "1Gi"}}});
    dynamic
        .create(&PostParams::default(), &broken)
        .await
        .expect("stored under the loose schema");
    let operator = Operator::start(&h.client, None);
    create(&h.client, "fine", small()).await;
    wait_for("the valid cluster's children", || {
        children_exist(&h.client, "fine")
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.client.clone(), NS);
    wait_for("an event on the undecodable cluster", || async {
        events.list(&Default::default()).await.is_ok_and(|list| {
            list.items.iter().any(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken")
                    && e.reason.as_deref() == Some("InvalidSpec")
                    && e.note.as_deref().is_some_and(|n| n.contains("cannot read"))
            })
        })
    })
    .await;
    assert!(get::<Pod>(&h.client, "broken-1").await.is_none());
    operator.stop().await;
}
