//! Operator upgrades (R9, R27): a new operator version changes every
//! cluster's pods (their init container carries its image), but rolls
//! them for at most `max_concurrent_upgrades` clusters at a time; the
//! others wait (`WaitingForSlot`) with every instance serving.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tusk_api::v1alpha1::PostgresClusterStatus;
use tusk_operator::config::OperatorConfig;

use crate::instances::Instances;
use crate::support::*;

const CLUSTERS: [&str; 3] = ["up-a", "up-b", "up-c"];

async fn pod_uid(client: &Client, name: &str) -> Option<String> {
    get::<Pod>(client, name).await.and_then(|p| p.uid())
}

async fn status_of(client: &Client, name: &str) -> PostgresClusterStatus {
    get::<PostgresCluster>(client, name)
        .await
        .and_then(|c| c.status)
        .unwrap_or_default()
}

/// What the watch of the clusters saw of their rollouts.
#[derive(Clone, Debug, Default)]
struct Rollouts {
    /// A cluster was seen waiting for a slot.
    waited_for_a_slot: bool,
    /// The most clusters seen rolling (holding a slot) at once.
    most_rolling: usize,
}

/// Follows every version of the clusters, in order, recording the rollout
/// steps into `record`; panics on a rollout that is not the operator's
/// upgrade or on two clusters rolling at once.
async fn watch_rollouts(client: Client, record: Arc<Mutex<Rollouts>>) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let api = Api::<PostgresCluster>::namespaced(client, NS);
    let mut rolling = BTreeMap::new();
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    while let Some(event) = events.next().await {
        let (watcher::Event::Apply(cluster) | watcher::Event::InitApply(cluster)) =
            event.expect("the watch of the clusters")
        else {
            continue;
        };
        let rollout = cluster.status.as_ref().and_then(|s| s.rollout.as_ref());
        let mut record = record.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(rollout) = rollout {
            assert!(rollout.operator_upgrade, "{rollout:?}");
            assert_eq!(rollout.reason, "changed: the operator's version");
            if rollout.step == "WaitingForSlot" {
                record.waited_for_a_slot = true;
                let phase = cluster.status.as_ref().and_then(|s| s.phase);
                assert_eq!(phase, Some(ClusterPhase::Upgrading));
            }
        }
        let holds_a_slot = rollout.is_some_and(|r| r.step != "WaitingForSlot");
        rolling.insert(cluster.name_any(), holds_a_slot);
        let now = rolling.values().filter(|r| **r).count();
        assert!(now <= 1, "{now} clusters rolled at once");
        record.most_rolling = record.most_rolling.max(now);
    }
}

#[tokio::test]
async fn a_new_operator_version_rolls_one_cluster_at_a_time() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let mut scripted = Vec::new();
    for name in CLUSTERS {
        create(
            &h.client,
            name,
            json!({"instances": 1, "postgres": {"version": 15},
            "storage": {"size": "1Gi"}, "failover": {"delaySeconds": 30}}),
        )
        .await;
        let instance = format!("{name}-1");
        scripted.push(Instances::start(&h.client, name, &[instance.as_str()]).await);
    }
    for name in CLUSTERS {
        wait_for("every cluster Ready", || async {
            status_phase(&h.client, name).await == Some(ClusterPhase::Ready)
        })
        .await;
    }
    let mut before = BTreeMap::new();
    for name in CLUSTERS {
        before.insert(name, pod_uid(&h.client, &format!("{name}-1")).await);
    }
    operator.stop().await;

    // The next version: another image for the instance manager, and at
    // most one cluster rolling for it at a time.
    let upgraded = Operator::start_with_settings(
        &h.client,
        Settings {
            config: OperatorConfig {
                operator_image: "ghcr.io/tusk-dev/tusk:99.0.0".to_owned(),
                max_concurrent_upgrades: 1,
                ..OperatorConfig::default()
            },
            ..Settings::default()
        },
    );
    // Every version of every cluster, in the API server's order: a
    // cluster waits its turn only briefly, too briefly for polling to see.
    let record = Arc::new(Mutex::new(Rollouts::default()));
    let seen = tokio::spawn(watch_rollouts(h.client.clone(), record.clone()));
    let started = std::time::Instant::now();
    loop {
        let mut replaced = 0;
        for name in CLUSTERS {
            let status = status_of(&h.client, name).await;
            let uid = pod_uid(&h.client, &format!("{name}-1")).await;
            if uid.is_some() && uid != before[name] && status.rollout.is_none() {
                replaced += 1;
            }
        }
        if replaced == CLUSTERS.len() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "not every cluster's pod was replaced"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen.abort();
    match seen.await {
        Err(e) if e.is_cancelled() => {}
        Err(e) => std::panic::resume_unwind(e.into_panic()),
        Ok(()) => panic!("the watch of the clusters ended early"),
    }
    let record = record
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(
        record.waited_for_a_slot,
        "the other clusters waited their turn: {record:?}"
    );
    assert_eq!(record.most_rolling, 1, "{record:?}");
    for name in CLUSTERS {
        let pvc: Option<PersistentVolumeClaim> = get(&h.client, &format!("{name}-1")).await;
        assert!(pvc.is_some(), "{name} kept its volume");
        let pod: Pod = get(&h.client, &format!("{name}-1")).await.expect("a pod");
        let init = &pod.spec.expect("spec").init_containers.expect("init")[0];
        assert_eq!(init.image.as_deref(), Some("ghcr.io/tusk-dev/tusk:99.0.0"));
    }
    upgraded.stop().await;
    drop(scripted);
}
