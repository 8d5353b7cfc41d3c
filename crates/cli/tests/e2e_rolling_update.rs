//! A rolling update end to end (R9, R27), on the full sandbox with real
//! PostgreSQL: a change of `spec.resources` (which only a new pod can
//! take) on a three-instance synchronous cluster with a writer recording
//! every acknowledged commit through `-rw`. Every pod must be replaced on
//! its own volume, replicas first, then a switchover to an updated
//! replica, then the former primary; the cluster reports `Upgrading`
//! meanwhile; no acknowledged write may be lost, and the longest time
//! without an acknowledged write (the switchover's pause) is printed.
//! Then settings that need a restart roll the same way (replicas first,
//! never two instances down at once), and lowering `max_connections`
//! restarts the primary first, in place; still no acknowledged write lost.

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

/// What following a rollout saw.
struct Rolled {
    /// Instances in the order their pods were replaced.
    replaced: Vec<String>,
    /// Instances whose PostgreSQL restarted in place, on a pod the rollout
    /// did not replace (a restart the instance made for its own reasons,
    /// such as the primary lease lapsing on a loaded machine, also applies
    /// settings that need one); looked at only by a settings rollout.
    in_place: Vec<String>,
    /// The steps `status.rollout` went through, with their reasons.
    steps: Vec<String>,
    upgrading: bool,
    /// From the switchover's decision to the new primary serving.
    switchover: (Option<Instant>, Option<Instant>),
    /// The fewest ready instances seen at once (outside a switchover).
    fewest_ready: i32,
}

impl Rolled {
    /// Keeps the fewest ready instances, printing each new low with the
    /// instances' roles and readiness.
    fn count_ready(
        &mut self,
        status: &tusk_api::v1alpha1::PostgresClusterStatus,
        started: Instant,
    ) {
        if status.ready_instances >= self.fewest_ready {
            return;
        }
        self.fewest_ready = status.ready_instances;
        let shown: Vec<String> = status
            .instances
            .iter()
            .map(|i| format!("{} {} ready={}", i.name, i.role, i.ready))
            .collect();
        println!(
            "{:>6.1?} {} ready: {shown:?}",
            started.elapsed(),
            status.ready_instances
        );
    }
}

/// When a rollout began: on the test's clock, and on the wall clock to
/// compare with PostgreSQL's start times (`in_place`: a settings
/// rollout, where a PostgreSQL restarted in place counts as restarted).
#[derive(Clone, Copy)]
struct Began {
    at: Instant,
    wall: f64,
    in_place: bool,
}

impl Began {
    fn now(in_place: bool) -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("a clock after 1970")
            .as_secs_f64();
        Began {
            at: Instant::now(),
            wall,
            in_place,
        }
    }
}

/// Instances of `before` not in `replaced` whose PostgreSQL started after
/// `since` (seconds since the epoch); one that does not answer now is
/// looked at again in the next pass.
async fn restarted_in_place(
    world: &World,
    before: &BTreeMap<String, (String, String)>,
    replaced: &[String],
    since: f64,
) -> Vec<String> {
    let mut restarted = Vec::new();
    for instance in before.keys().filter(|i| !replaced.contains(i)) {
        let sql = "SELECT extract(epoch FROM pg_postmaster_start_time())::float8";
        if query_one::<f64>(world, instance, sql)
            .await
            .is_ok_and(|started| started > since)
        {
            restarted.push(instance.clone());
        }
    }
    restarted
}

/// Follows the rollout that began at `began` until `expected` instances of
/// `before` were restarted (their pods replaced, or in a settings rollout
/// their PostgreSQL restarted in place) and the cluster is Ready again,
/// with its primary serving.
async fn follow(
    world: &World,
    before: &BTreeMap<String, (String, String)>,
    expected: usize,
    old_primary: &str,
    began: Began,
) -> Rolled {
    let started = began.at;
    let mut rolled = Rolled {
        replaced: Vec::new(),
        in_place: Vec::new(),
        steps: Vec::new(),
        upgrading: false,
        switchover: (None, None),
        fewest_ready: i32::MAX,
    };
    loop {
        let now = uids(world).await;
        for (name, (pod, _)) in &now {
            if before.get(name).is_some_and(|(old, _)| old != pod)
                && !rolled.replaced.contains(name)
            {
                rolled.replaced.push(name.clone());
            }
        }
        let status = world.status(CLUSTER).await;
        // Judged after this status's own news of a switchover: the poll
        // may first see one in a status where it already took the
        // instances down.
        let moved = status.target_primary.as_deref() != Some(old_primary);
        if moved && rolled.switchover.0.is_none() {
            rolled.switchover.0 = Some(Instant::now());
        }
        if moved && rolled.switchover.1.is_none() && status.current_primary == status.target_primary
        {
            rolled.switchover.1 = Some(Instant::now());
        }
        // A switchover has both primaries briefly not ready: counted
        // apart, by the writer's pause.
        let switching = match rolled.switchover {
            (Some(_), None) => true,
            // The new primary's pod turns ready a probe period after it
            // serves.
            (Some(_), Some(served)) => served.elapsed() < Duration::from_secs(5),
            (None, _) => false,
        };
        if !switching {
            rolled.count_ready(&status, started);
        }
        rolled.upgrading |= status.phase == Some(ClusterPhase::Upgrading);
        if let Some(rollout) = &status.rollout {
            let step = format!(
                "{} {} ({})",
                rollout.step,
                rollout.instance.as_deref().unwrap_or(""),
                rollout.reason
            );
            if rolled.steps.last() != Some(&step) {
                println!("{:>6.1?} {step}", started.elapsed());
                rolled.steps.push(step);
            }
        }
        let settled = status.rollout.is_none()
            && status.phase == Some(ClusterPhase::Ready)
            && status.current_primary.is_some()
            && status.current_primary == status.target_primary;
        if settled && began.in_place && rolled.replaced.len() < expected {
            rolled.in_place = restarted_in_place(world, before, &rolled.replaced, began.wall).await;
        }
        if settled && rolled.replaced.len() + rolled.in_place.len() >= expected {
            return rolled;
        }
        if started.elapsed() > Duration::from_secs(300) {
            panic!(
                "the rollout did not finish: replaced {:?}, restarted in place {:?}, status \
                 {status:#?}\n{}",
                rolled.replaced,
                rolled.in_place,
                world.story(CLUSTER).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The one value `sql` returns on `instance`, by its pod address.
async fn query_one<T>(world: &World, instance: &str, sql: &str) -> Result<T, String>
where
    T: for<'a> tokio_postgres::types::FromSql<'a>,
{
    let ip = common::pod_ip(world, instance)
        .await
        .ok_or_else(|| format!("{instance} has no pod address"))?;
    let (client, connection) = tokio_postgres::connect(
        &world.conninfo_at(&ip, CLUSTER).await,
        common::tls::encrypted(),
    )
    .await
    .map_err(|e| format!("a session on {instance}: {e}"))?;
    tokio::spawn(connection);
    let row = client
        .query_one(sql, &[])
        .await
        .map_err(|e| format!("{sql} on {instance}: {e}"))?;
    row.try_get(0)
        .map_err(|e| format!("{sql} on {instance}: {e}"))
}

/// `SHOW name` on every instance, by pod address.
async fn shown_everywhere(world: &World, name: &str) -> BTreeMap<String, String> {
    let mut shown = BTreeMap::new();
    for instance in uids(world).await.keys() {
        let value: String = query_one(world, instance, &format!("SHOW {name}"))
            .await
            .expect("SHOW");
        shown.insert(instance.clone(), value);
    }
    shown
}

/// Changes `parameters` and follows the rolling restart it needs, until
/// `expected` pods were replaced.
async fn restart_for(
    world: &World,
    parameters: serde_json::Value,
    expected: usize,
) -> (Rolled, String) {
    let before = uids(world).await;
    let primary = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let began = Began::now(true);
    let patch = serde_json::json!({"spec": {"postgres": {"parameters": parameters}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("parameters changed");
    let rolled = follow(world, &before, expected, &primary, began).await;
    println!(
        "restarted {:?} (in place, on their own: {:?}) in {:?}",
        rolled.replaced,
        rolled.in_place,
        began.at.elapsed()
    );
    (rolled, primary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resources_change_rolls_every_instance_without_losing_a_write() {
    let world = World::start().await;
    let (writer, old_primary) = world.durable_cluster_with_writer(CLUSTER, 5).await;
    let before = uids(&world).await;
    assert_eq!(before.len(), 3, "{before:?}");

    let began = Began::now(false);
    let started = began.at;
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"memory": "64Mi"}}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("spec changed");

    let Rolled {
        replaced,
        upgrading,
        switchover,
        ..
    } = follow(&world, &before, before.len(), &old_primary, began).await;
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

    // A setting that needs a restart rolls the same way (never every
    // instance at once): the replicas' pods replaced, then a switchover;
    // the former primary restarts as a standby of the new one, which
    // applies the setting with no replacement. (An instance that
    // restarted PostgreSQL on its own meanwhile needs no replacement; a
    // primary that did needs no switchover.)
    let (rolled, primary) =
        restart_for(&world, serde_json::json!({"shared_buffers": "24MB"}), 2).await;
    assert!(
        rolled
            .steps
            .iter()
            .all(|s| s.contains("settings that need a restart")
                && !s.starts_with("RestartingPrimary")),
        "{:?}",
        rolled.steps
    );
    assert!(!rolled.replaced.contains(&primary), "{:?}", rolled.replaced);
    assert!(
        rolled.switchover.0.is_some() || rolled.in_place.contains(&primary),
        "a switchover"
    );
    assert!(
        rolled.fewest_ready >= 2,
        "two instances down at once: {}",
        rolled.fewest_ready
    );
    let shown = shown_everywhere(&world, "shared_buffers").await;
    assert!(shown.values().all(|v| v == "24MB"), "{shown:?}");

    // Lowering a standby minimum restarts the primary first, in place.
    let (rolled, primary) =
        restart_for(&world, serde_json::json!({"max_connections": "90"}), 3).await;
    assert_eq!(
        rolled.replaced.first(),
        Some(&primary),
        "{:?}",
        rolled.replaced
    );

    assert!(rolled.switchover.0.is_none(), "no switchover");
    let shown = shown_everywhere(&world, "max_connections").await;
    assert!(shown.values().all(|v| v == "90"), "{shown:?}");
    world.wait_replicating(CLUSTER, 3).await;
    writer.wait_for_more(20, Duration::from_secs(60)).await;
    println!(
        "over the rolling restarts: longest time without an acknowledged write {:?}",
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

    // An approved major version whose upgrade waits (here for a recent
    // backup) is held: a pod re-created meanwhile keeps running its
    // data's major (before, it got the new major's binaries and
    // crash-looped on `VersionMismatch`).
    let patch = serde_json::json!({"spec": {"postgres": {"version": 16},
        "upgrade": {"approvedVersion": 16}}});
    world
        .clusters()
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("version declared");
    let replica = world
        .status(CLUSTER)
        .await
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
    let waiting = status
        .conditions
        .iter()
        .find(|c| c.type_ == tusk_api::conditions::MAJOR_UPGRADE)
        .map(|c| (c.status.clone(), c.reason.clone()));
    assert_eq!(
        waiting,
        Some(("False".to_owned(), "NoRecentBackup".to_owned())),
        "{:?}",
        status.conditions
    );
    world.shutdown().await;
}
