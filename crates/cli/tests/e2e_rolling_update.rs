//! A rolling update end to end (R9, R27), on the full sandbox with real
//! PostgreSQL: a change of `spec.resources` (which only a new pod can
//! take) on a three-instance synchronous cluster with a writer recording
//! every acknowledged commit through `-rw`. Every pod must be replaced on
//! its own volume, replicas first, then a switchover to an updated
//! replica, then the former primary; the cluster reports `Upgrading`
//! meanwhile; no acknowledged write may be lost, and the longest time
//! without an acknowledged write (the switchover's pause) is printed.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{NS, World};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use tusk_api::v1alpha1::ClusterPhase;

const CLUSTER: &str = "roll";

/// Each instance's pod and volume uid.
async fn uids(world: &World) -> BTreeMap<String, (String, String)> {
    let selector = ListParams::default().labels(&format!("tusk.dev/cluster={CLUSTER}"));
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    let volumes: Api<PersistentVolumeClaim> = Api::namespaced(world.client.clone(), NS);
    let volumes: BTreeMap<String, String> = volumes
        .list(&selector)
        .await
        .expect("volumes")
        .into_iter()
        .map(|v| (v.name_any(), v.uid().unwrap_or_default()))
        .collect();
    pods.list(&selector)
        .await
        .expect("pods")
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let volume = volumes.get(&p.name_any()).cloned().unwrap_or_default();
            (p.name_any(), (p.uid().unwrap_or_default(), volume))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resources_change_rolls_every_instance_without_losing_a_write() {
    let world = World::start().await;
    let (writer, old_primary) = world.durable_cluster_with_writer(CLUSTER, 5).await;
    let before = uids(&world).await;
    assert_eq!(before.len(), 3, "{before:?}");

    let started = Instant::now();
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"memory": "64Mi"}}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("spec changed");

    // Follow the rollout until every pod was replaced and the cluster is
    // Ready again; note the order in which instances were replaced.
    let mut replaced: Vec<String> = Vec::new();
    let mut steps: Vec<String> = Vec::new();
    let mut upgrading = false;
    // From the switchover's decision to the new primary serving.
    let mut switchover: (Option<Instant>, Option<Instant>) = (None, None);
    loop {
        let now = uids(&world).await;
        for (name, (pod, _)) in &now {
            if before.get(name).is_some_and(|(old, _)| old != pod) && !replaced.contains(name) {
                replaced.push(name.clone());
            }
        }
        let status = world.status(CLUSTER).await;
        upgrading |= status.phase == Some(ClusterPhase::Upgrading);
        let moved = status.target_primary.as_deref() != Some(old_primary.as_str());
        if moved && switchover.0.is_none() {
            switchover.0 = Some(Instant::now());
        }
        if moved && switchover.1.is_none() && status.current_primary == status.target_primary {
            switchover.1 = Some(Instant::now());
        }
        if let Some(rollout) = &status.rollout {
            let step = format!(
                "{} {}",
                rollout.step,
                rollout.instance.as_deref().unwrap_or("")
            );
            if steps.last() != Some(&step) {
                println!("{:>6.1?} {step} ({})", started.elapsed(), rollout.reason);
                steps.push(step);
            }
        }
        if replaced.len() == 3
            && status.rollout.is_none()
            && status.phase == Some(ClusterPhase::Ready)
            && status.current_primary.is_some()
            && status.current_primary == status.target_primary
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the rollout did not finish: replaced {replaced:?}, status {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("rolled {replaced:?} in {:?}", started.elapsed());
    assert!(
        upgrading,
        "the cluster reported Upgrading during the rollout"
    );

    // Replicas first, the former primary last, each on its own volume.
    assert_eq!(replaced.last(), Some(&old_primary), "{replaced:?}");
    let after = uids(&world).await;
    for (name, (_, volume)) in &before {
        assert_eq!(
            after.get(name).map(|(_, v)| v),
            Some(volume),
            "{name} kept its volume"
        );
    }
    let status = world.status(CLUSTER).await;
    let record = status.last_failover.clone().expect("a switchover");
    assert_eq!(
        (record.reason.as_str(), record.from.as_str()),
        ("Switchover", old_primary.as_str())
    );
    assert_ne!(
        status.current_primary.as_deref(),
        Some(old_primary.as_str())
    );

    world.wait_replicating(CLUSTER, 3).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    let (Some(decided), Some(served)) = switchover else {
        panic!("the switchover was not seen: {switchover:?}");
    };
    // The poll runs every 200 ms: widen the window by as much.
    let pause = writer.longest_pause_between(
        decided - Duration::from_millis(300),
        served + Duration::from_millis(300),
    );
    println!(
        "switchover {} -> {} ({:?} s from the decision to the new primary serving): longest time \
         without an acknowledged write {pause:?}; over the whole rolling update {:?}",
        record.from,
        record.to,
        record.duration_seconds,
        writer.longest_pause_since(started)
    );
    let acknowledged = writer.finish().await;
    let (missing, stored) = world.missing_from_ledger(CLUSTER, &acknowledged).await;
    println!(
        "{} acknowledged commits, {stored} rows stored, {} missing",
        acknowledged.len(),
        missing.len()
    );
    assert!(missing.is_empty(), "acknowledged rows lost: {missing:?}");

    // An approved major version this operator does not upgrade to is
    // held: a pod re-created afterwards keeps running its data's major
    // (before, it got the new major's binaries and crash-looped on
    // `VersionMismatch`).
    let patch = serde_json::json!({"spec": {"postgres": {"version": 16},
        "upgrade": {"approvedVersion": 16}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("version declared");
    let replica = status
        .instances
        .iter()
        .find(|i| i.role == "replica")
        .map(|i| i.name.clone())
        .expect("a replica");
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), NS);
    let old_pod = uids(&world).await[&replica].0.clone();
    pods.delete(&replica, &Default::default())
        .await
        .expect("pod deleted");
    common::wait_for(
        "the re-created pod serving again",
        Duration::from_secs(120),
        || async {
            let s = world.status(CLUSTER).await;
            let recreated = uids(&world)
                .await
                .get(&replica)
                .is_some_and(|(uid, _)| *uid != old_pod);
            recreated && s.ready_instances == 3 && s.rollout.is_none()
        },
    )
    .await;
    let status = world.status(CLUSTER).await;
    assert_eq!(status.postgres_version, Some(15));
    let unsupported = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Unsupported" && c.status == "True")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        unsupported.contains("spec.postgres.version 16"),
        "{unsupported}"
    );
    world.shutdown().await;
}
