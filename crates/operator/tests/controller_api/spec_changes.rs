//! Spec changes: invalid specs, storage growth and refused shrinks, observed
//! state kept across an invalid edit, time to observe a change (R3, R20, R26).

use crate::support::*;

#[tokio::test]
async fn an_invalid_spec_degrades_the_cluster_without_a_hot_loop() {
    // Without CEL in the CRD, the controller is the last line of defence.
    let h = sandbox(false).await;
    let operator = Operator::start(&h.client, None);
    let mut spec = small();
    spec["postgres"]["parameters"] = json!({"wal_level": "minimal"});
    create(&h.client, "bad", spec).await;
    wait_for("Degraded", || async {
        status_phase(&h.client, "bad").await == Some(ClusterPhase::Degraded)
    })
    .await;
    let live: PostgresCluster = get(&h.client, "bad").await.expect("cluster");
    let degraded = live
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Degraded")
        .expect("Degraded condition");
    assert_eq!(degraded.status, "True");
    assert_eq!(degraded.reason, "InvalidSpec");
    assert!(
        degraded.message.contains("spec.postgres.parameters"),
        "{}",
        degraded.message
    );
    assert!(
        degraded.message.contains("wal_level"),
        "{}",
        degraded.message
    );
    assert!(
        get::<Pod>(&h.client, "bad-1").await.is_none(),
        "nothing is built from an invalid spec"
    );

    let before: u64 = h.sandbox.faults().count("*", "*");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests = h.sandbox.faults().count("*", "*") - before;
    assert!(
        requests <= 10,
        "a permanent error must not loop: {requests} requests in 5 s"
    );
    operator.stop().await;
}

#[tokio::test]
async fn storage_grows_and_a_shrink_is_refused_even_past_admission() {
    // R26. Without CEL in the CRD, a shrink reaches the controller.
    let h = sandbox(false).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "disk", small()).await;
    wait_for("the volume", || async {
        requested_storage(&h.client, "disk-1").await.is_some()
    })
    .await;
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    let size = |s: &str| json!({"spec": {"storage": {"size": s}}});
    clusters
        .patch("disk", &PatchParams::default(), &Patch::Merge(&size("2Gi")))
        .await
        .expect("grow");
    wait_for("the volume to grow", || async {
        requested_storage(&h.client, "disk-1").await.as_deref() == Some("2Gi")
    })
    .await;
    clusters
        .patch(
            "disk",
            &PatchParams::default(),
            &Patch::Merge(&size("1536Mi")),
        )
        .await
        .expect("a shrink the old CRD admits");
    wait_for("the refusal in Degraded", || async {
        condition(&h.client, "disk", "Degraded")
            .await
            .is_some_and(|(status, reason, message)| {
                status == "True" && reason == "RefusedChange" && message.contains("never shrink")
            })
    })
    .await;
    assert_eq!(
        requested_storage(&h.client, "disk-1").await.as_deref(),
        Some("2Gi"),
        "the volume keeps its size"
    );
    wait_for("a RefusedChange event", || async {
        events_of(&h.client, "disk")
            .await
            .iter()
            .any(|(reason, note)| reason == "RefusedChange" && note.contains("disk-1"))
    })
    .await;
    assert!(
        events_of(&h.client, "disk")
            .await
            .iter()
            .any(|(reason, _)| reason == "PhaseChanged"),
        "phase transitions are events too"
    );
    operator.stop().await;
}

#[tokio::test]
async fn an_invalid_edit_keeps_the_observed_instances_in_status() {
    // Without CEL in the CRD, an invalid edit reaches the controller.
    let h = sandbox(false).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "kept", small()).await;
    wait_for("the instance in status", || async {
        instances_of(&h.client, "kept")
            .await
            .iter()
            .any(|i| i.name == "kept-1")
    })
    .await;
    // The last position and synchronous state the instance reported, as
    // the operator recorded them: what a later failover decides on.
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    let mut status = get::<PostgresCluster>(&h.client, "kept")
        .await
        .and_then(|c| c.status)
        .expect("status");
    for instance in &mut status.instances {
        instance.timeline = Some(1);
        instance.lsn = Some("0/3000060".to_owned());
        instance.sync_state = Some("sync".to_owned());
    }
    let recorded = json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "status": status,
    });
    clusters
        .patch_status(
            "kept",
            &PatchParams::apply("tusk-operator").force(),
            &Patch::Apply(&recorded),
        )
        .await
        .expect("status written");
    let mut invalid = small();
    invalid["postgres"]["parameters"] = json!({"wal_level": "minimal"});
    clusters
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": invalid})),
        )
        .await
        .expect("an edit the old CRD admits");
    wait_for("the invalid spec reported", || async {
        condition(&h.client, "kept", "Degraded")
            .await
            .is_some_and(|(status, reason, _)| status == "True" && reason == "InvalidSpec")
    })
    .await;
    let instances = instances_of(&h.client, "kept").await;
    let kept = instances.iter().find(|i| i.name == "kept-1");
    assert_eq!(
        kept.map(|i| (i.lsn.as_deref(), i.timeline, i.sync_state.as_deref())),
        Some((Some("0/3000060"), Some(1), Some("sync"))),
        "the observed instances stay in status: {instances:?}"
    );
    operator.stop().await;
}

#[tokio::test]
async fn an_invalid_edit_keeps_the_last_valid_spec_maintained_across_a_restart() {
    let h = sandbox(true).await;
    let mut operator = Operator::start(&h.client, None);
    create(&h.client, "kept", small()).await;
    wait_for("the children", || async {
        children_exist(&h.client, "kept").await
    })
    .await;
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    let buffers =
        |value: &str| json!({"spec": {"postgres": {"parameters": {"shared_buffers": value}}}});
    clusters
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(&buffers("Retain")),
        )
        .await
        .expect("a value admission cannot judge");
    let field = "spec.postgres.parameters.shared_buffers";
    wait_for("InvalidSpec naming the field", || async {
        condition(&h.client, "kept", "Degraded")
            .await
            .is_some_and(|(status, reason, message)| {
                status == "True" && reason == "InvalidSpec" && message.contains(field)
            })
    })
    .await;
    let recorded = |c: Option<PostgresCluster>| {
        c.and_then(|c| c.status)
            .and_then(|s| s.last_valid_spec)
            .map(|r| (r.generation, r.spec["postgres"]["parameters"].clone()))
    };
    assert_eq!(
        recorded(get(&h.client, "kept").await),
        Some((1, serde_json::Value::Null)),
        "the first generation is the last valid spec (no parameters)"
    );
    for round in 0..2 {
        if round == 1 {
            // A new operator finds the record in status.
            operator.stop().await;
            operator = Operator::start(&h.client, None);
        }
        let pod = get::<Pod>(&h.client, "kept-1").await.expect("pod");
        Api::<Pod>::namespaced(h.client.clone(), NS)
            .delete("kept-1", &DeleteParams::default().grace_period(0))
            .await
            .expect("the pod deleted");
        Api::<Service>::namespaced(h.client.clone(), NS)
            .delete("kept-rw", &DeleteParams::default())
            .await
            .expect("the Service deleted");
        wait_for("the pod and the Service made again", || async {
            get::<Pod>(&h.client, "kept-1")
                .await
                .is_some_and(|p| p.uid() != pod.uid())
                && get::<Service>(&h.client, "kept-rw").await.is_some()
        })
        .await;
    }
    clusters
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(&buffers("32MB")),
        )
        .await
        .expect("the spec fixed");
    wait_for("the fixed spec recorded, InvalidSpec gone", || async {
        let cluster = get::<PostgresCluster>(&h.client, "kept").await;
        let invalid = cluster
            .as_ref()
            .and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.conditions.iter().any(|c| c.reason == "InvalidSpec"));
        !invalid && recorded(cluster) == Some((3, json!({"shared_buffers": "32MB"})))
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn every_spec_change_is_timed_until_status_observes_it() {
    let h = sandbox(true).await;
    let metrics = free_port();
    let operator = Operator::start_with_http(&h.client, None, Some(metrics));
    let count = "tusk_operator_generation_observed_seconds_count";
    create(&h.client, "timed", small()).await;
    wait_for("the first generation timed", || async {
        observed_generation(&h.client, "timed").await == Some(1)
            && histogram(metrics, count).await == 1.0
    })
    .await;
    // The changes come well after creation, so a change timed from the
    // creation instead of from its own write shows up as too long.
    const AFTER_CREATION: Duration = Duration::from_secs(4);
    tokio::time::sleep(AFTER_CREATION).await;
    let sum = "tusk_operator_generation_observed_seconds_sum";
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    for (generation, instances) in [(2, 2), (3, 1)] {
        let before = histogram(metrics, sum).await;
        clusters
            .patch(
                "timed",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"instances": instances}})),
            )
            .await
            .expect("a spec change");
        wait_for("the spec change timed", || async {
            observed_generation(&h.client, "timed").await == Some(generation)
                && histogram(metrics, count).await == generation as f64
        })
        .await;
        // Whole-second times on the server: up to 1 s more than it took.
        let took = histogram(metrics, sum).await - before;
        assert!(
            took < AFTER_CREATION.as_secs_f64() - 0.5,
            "generation {generation} timed from its own write, not from creation: {took} s"
        );
    }
    operator.stop().await;
}
