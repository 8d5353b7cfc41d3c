//! Failover decisions against a real API server, with scripted instance
//! reports (see [`crate::instances`]): an approval must quote the blocked
//! decision, a pod being deleted is never chosen, and a promotion that
//! does not complete in time is abandoned for the next best standby (R25).

use tusk_api::labels;
use tusk_api::v1alpha1::{FailoverRecord, PostgresClusterStatus};

use crate::instances::{Instances, standby};
use crate::support::*;

async fn status_of(client: &Client, name: &str) -> PostgresClusterStatus {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .unwrap_or_default()
}

async fn annotations_of(client: &Client, name: &str) -> std::collections::BTreeMap<String, String> {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.metadata.annotations)
        .unwrap_or_default()
}

async fn annotate(client: &Client, name: &str, key: &str, value: &str) {
    let api: Api<PostgresCluster> = Api::namespaced(client.clone(), NS);
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotated");
}

/// A cluster of `names.len()` instances with `failover`, serving from
/// its first instance with every standby streaming.
async fn serving(
    client: &Client,
    cluster: &str,
    names: &[&str],
    failover: serde_json::Value,
) -> Instances {
    let instances = Instances::start(client, cluster, names).await;
    let count = names.len();
    create(
        client,
        cluster,
        json!({"instances": count, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
               "failover": failover}),
    )
    .await;
    wait_for("the cluster serves with every instance ready", || async {
        let status = status_of(client, cluster).await;
        status.current_primary.as_deref() == Some(names[0])
            && status.instances.iter().filter(|i| i.ready).count() == count
    })
    .await;
    instances
}

async fn last_failover(client: &Client, name: &str) -> Option<FailoverRecord> {
    status_of(client, name).await.last_failover
}

#[tokio::test]
async fn an_approval_that_does_not_quote_the_blocked_decision_approves_nothing() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let names = ["quote-1", "quote-2"];
    // Required durability without synchronous replication: blocked.
    let instances = serving(&h.client, "quote", &names, json!({"delaySeconds": 0})).await;
    instances.set(
        "quote-2",
        true,
        Some(standby("quote-2", "0/2FFFF00", false)),
    );
    instances.fail("quote-1");
    wait_for("the failover is blocked with an identity", || async {
        status_of(&h.client, "quote").await.failover.is_some()
    })
    .await;
    let blocked = status_of(&h.client, "quote")
        .await
        .failover
        .and_then(|f| f.blocked)
        .expect("a blocked decision");
    assert_eq!(
        (blocked.from.as_str(), blocked.to.as_str()),
        ("quote-1", "quote-2")
    );

    // An approval in the old form, and one quoting another decision.
    for wrong in ["quote-2", "0123456789"] {
        annotate(&h.client, "quote", labels::APPROVE_DATA_LOSS, wrong).await;
        wait_for("the wrong approval is removed", || async {
            !annotations_of(&h.client, "quote")
                .await
                .contains_key(labels::APPROVE_DATA_LOSS)
        })
        .await;
        let status = status_of(&h.client, "quote").await;
        assert_eq!(
            status.target_primary.as_deref(),
            Some("quote-1"),
            "{wrong} approved nothing"
        );
        assert!(status.last_failover.is_none());
        let events = events_of(&h.client, "quote").await;
        assert!(
            events
                .iter()
                .any(|(reason, note)| reason == "ApprovalRejected"
                    && note.contains(&format!("{wrong:?}"))
                    && note.contains(&format!("{}={}", labels::APPROVE_DATA_LOSS, blocked.id))),
            "{events:?}, first blocked {blocked:?}, now {:?}",
            status.failover
        );
        let (state, _, message) = condition(&h.client, "quote", "FailoverBlocked")
            .await
            .expect("FailoverBlocked");
        assert_eq!(state, "True");
        assert!(
            message.contains(&format!("it must say {}", blocked.id)),
            "{message}"
        );
    }

    annotate(&h.client, "quote", labels::APPROVE_DATA_LOSS, &blocked.id).await;
    wait_for("the quoted approval promotes quote-2", || async {
        last_failover(&h.client, "quote")
            .await
            .is_some_and(|r| r.to == "quote-2" && r.reason == "ApprovedFailover")
    })
    .await;
    wait_for("the used approval is removed", || async {
        !annotations_of(&h.client, "quote")
            .await
            .contains_key(labels::APPROVE_DATA_LOSS)
    })
    .await;
    operator.stop().await;
}

/// Keeps the pod `name` after a delete, as a finalizer of another
/// controller would, so it stays "being deleted".
async fn delete_but_hold(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let hold = json!({"metadata": {"finalizers": ["test.tusk.dev/hold"]}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .expect("finalizer added");
    pods.delete(name, &DeleteParams::default())
        .await
        .expect("deleted");
}

#[tokio::test]
async fn a_pod_being_deleted_is_never_chosen() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let names = ["going-1", "going-2", "going-3"];
    let failover = json!({"delaySeconds": 0, "dataDurability": "preferred"});
    let instances = serving(&h.client, "going", &names, failover).await;
    // going-3 is the most advanced standby, but its pod is being deleted.
    instances.set("going-3", true, Some(standby("going-3", "0/3000100", true)));
    delete_but_hold(&h.client, "going-3").await;

    annotate(&h.client, "going", labels::PROMOTE, "going-3").await;
    wait_for("the switchover to a deleting pod is refused", || async {
        events_of(&h.client, "going")
            .await
            .iter()
            .any(|(reason, note)| reason == "SwitchoverRefused" && note.contains("being deleted"))
    })
    .await;

    instances.set(
        "going-2",
        false,
        Some(standby("going-2", "0/3000000", false)),
    );
    instances.set(
        "going-3",
        false,
        Some(standby("going-3", "0/3000100", false)),
    );
    instances.fail("going-1");
    wait_for("a failover decided", || async {
        last_failover(&h.client, "going").await.is_some()
    })
    .await;
    let record = last_failover(&h.client, "going").await.expect("a record");
    assert_eq!(
        (record.from.as_str(), record.to.as_str()),
        ("going-1", "going-2")
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_promotion_that_does_not_complete_in_time_is_abandoned_for_the_next_best() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let names = ["stall-1", "stall-2", "stall-3"];
    let failover = json!({"delaySeconds": 0, "dataDurability": "preferred",
                          "promotionTimeoutSeconds": 5});
    let instances = serving(&h.client, "stall", &names, failover).await;
    instances.set(
        "stall-2",
        false,
        Some(standby("stall-2", "0/3000100", false)),
    );
    instances.set(
        "stall-3",
        false,
        Some(standby("stall-3", "0/3000000", false)),
    );
    instances.fail("stall-1");
    wait_for("stall-2, the most advanced, is chosen", || async {
        last_failover(&h.client, "stall")
            .await
            .is_some_and(|r| r.to == "stall-2")
    })
    .await;
    let chosen = std::time::Instant::now();
    // The chosen standby dies before it serves.
    instances.fail("stall-2");
    wait_for("the promotion is abandoned and stall-3 chosen", || async {
        last_failover(&h.client, "stall")
            .await
            .is_some_and(|r| r.to == "stall-3")
    })
    .await;
    let waited = chosen.elapsed();
    assert!(
        waited >= Duration::from_secs(3),
        "abandoned only after the timeout (5 s from the decision, recorded in whole seconds): {waited:?}"
    );
    let status = status_of(&h.client, "stall").await;
    let record = status.last_failover.expect("a record");
    assert_eq!(record.from, "stall-1");
    assert_eq!(record.abandoned, ["stall-2"]);
    assert_eq!(status.target_primary.as_deref(), Some("stall-3"));
    let (_, reason, message) = condition(&h.client, "stall", "PrimaryAvailable")
        .await
        .expect("PrimaryAvailable");
    assert_eq!(reason, "Promoting");
    assert!(
        message.contains("abandoned, not serving in time: stall-2"),
        "{message}"
    );
    let events = events_of(&h.client, "stall").await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "PromotionAbandoned"
                && note.contains("stall-2 did not report serving")),
        "{events:?}"
    );
    // stall-2 comes back as a standby: it is not chosen again; stall-3 serves.
    instances.set(
        "stall-2",
        true,
        Some(standby("stall-2", "0/3000100", false)),
    );
    instances.set(
        "stall-3",
        true,
        Some(crate::instances::primary("stall-3", "0/3000000")),
    );
    wait_for("stall-3 serves", || async {
        status_of(&h.client, "stall")
            .await
            .current_primary
            .as_deref()
            == Some("stall-3")
    })
    .await;
    operator.stop().await;
}
