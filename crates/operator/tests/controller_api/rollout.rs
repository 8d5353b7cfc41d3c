//! Operator upgrades (R9, R27): a new operator version changes every
//! cluster's pods (their init container carries its image), but rolls
//! them for at most `max_concurrent_upgrades` clusters at a time; the
//! others wait (`WaitingForSlot`) with every instance serving.

use std::collections::BTreeMap;

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
    let mut waited_for_a_slot = false;
    let mut most_rolling = 0;
    let started = std::time::Instant::now();
    loop {
        let mut rolling = 0;
        let mut replaced = 0;
        for name in CLUSTERS {
            let status = status_of(&h.client, name).await;
            if let Some(rollout) = &status.rollout {
                assert!(rollout.operator_upgrade, "{rollout:?}");
                assert_eq!(rollout.reason, "changed: the operator's version");
                if rollout.step == "WaitingForSlot" {
                    waited_for_a_slot = true;
                    assert_eq!(status.phase, Some(ClusterPhase::Upgrading));
                } else {
                    rolling += 1;
                }
            }
            let uid = pod_uid(&h.client, &format!("{name}-1")).await;
            if uid.is_some() && uid != before[name] && status.rollout.is_none() {
                replaced += 1;
            }
        }
        most_rolling = most_rolling.max(rolling);
        assert!(rolling <= 1, "{rolling} clusters rolled at once");
        if replaced == CLUSTERS.len() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "not every cluster's pod was replaced"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(waited_for_a_slot, "the other clusters waited their turn");
    assert_eq!(most_rolling, 1);
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
