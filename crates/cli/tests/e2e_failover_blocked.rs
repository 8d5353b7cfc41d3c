//! R25's conservative stop, end to end: with asynchronous replication and
//! `dataDurability: required`, a primary that fails while its standby lags
//! is not replaced automatically. The cluster says `FailoverBlocked` with
//! the gap and the decision's identity, `tusk promote` refuses without
//! `--accept-data-loss`, an approval that does not quote the identity (the
//! old standing form, naming the instance) approves nothing, and the
//! approval `tusk promote --accept-data-loss` writes, quoting it, promotes
//! the standby and records the possible loss. `tusk approve` lists the
//! blocked decision with the command that approves it, and refuses an
//! identity that is not its own.
//! On both runtimes.

mod common;

use std::time::Duration;

use common::runtime::Runtime;
use common::{NS, World, count_rows, wait_for};
use serde_json::json;
use tusk_api::conditions::{FAILOVER_BLOCKED, find_condition};
use tusk_api::lsn::Lsn;

const CLUSTER: &str = "lag";

fn tusk_promote(world: &World, args: &[&str]) -> (bool, String) {
    tusk(world, "promote", args)
}

/// `tusk command args` against the world: succeeded, and its output.
fn tusk(world: &World, command: &str, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tusk"))
        .arg(command)
        .args(args)
        .env("KUBECONFIG", world.kubeconfig())
        .output()
        .expect("tusk runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_asynchronous_standby_is_promoted_only_once_approved() {
    lagging_standby_approved(Runtime::Process).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_docker_a_lagging_asynchronous_standby_is_promoted_only_once_approved() {
    lagging_standby_approved(Runtime::Docker).await;
}

async fn lagging_standby_approved(runtime: Runtime) {
    let world = World::start_on(runtime).await;
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 2,
                   "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                   "storage": {"size": "1Gi"},
                   "failover": {"delaySeconds": 2, "dataDurability": "required"}}),
        )
        .await;
    world.wait_ready(CLUSTER, 2).await;
    let rw = format!("{CLUSTER}-rw");
    let primary_client = world.connect(&rw, CLUSTER).await;
    primary_client
        .batch_execute(
            "create table orders (id int primary key); insert into orders select generate_series(1, 10)",
        )
        .await
        .expect("rows");
    wait_for(
        "the rows on the standby",
        Duration::from_secs(30),
        || async { count_rows(&world, &format!("{CLUSTER}-ro"), CLUSTER).await == 10 },
    )
    .await;
    let status = world.status(CLUSTER).await;
    let primary = status.current_primary.clone().expect("a primary");
    let standby = status
        .instances
        .iter()
        .find(|i| i.name != primary)
        .map(|i| i.name.clone())
        .expect("a standby");

    // The standby stops receiving; the primary acknowledges more commits
    // on its own (asynchronous replication) and the operator sees them.
    let faults = world.node.as_ref().expect("node").faults();
    // Far more WAL than the sockets between them buffer (a few MiB), so
    // the standby really misses some once the primary fails.
    faults.freeze(NS, &standby, "postgres").expect("freeze");
    primary_client
        .batch_execute("insert into orders select generate_series(11, 400000)")
        .await
        .expect("commits the standby never receives");
    let after: Lsn = primary_client
        .query_one("select pg_current_wal_lsn()::text", &[])
        .await
        .expect("position")
        .get::<_, String>(0)
        .parse()
        .expect("an LSN");
    wait_for(
        "the operator to record the primary's position",
        Duration::from_secs(60),
        || async {
            let s = world.status(CLUSTER).await;
            s.instances.iter().any(|i| {
                i.name == primary
                    && i.lsn
                        .as_deref()
                        .and_then(|l| l.parse::<Lsn>().ok())
                        .is_some_and(|l| l >= after)
            })
        },
    )
    .await;

    // The primary fails; the standby, thawed, is behind.
    faults.freeze(NS, &primary, "postgres").expect("freeze");
    faults.thaw(NS, &standby, "postgres").expect("thaw");
    wait_for("FailoverBlocked", Duration::from_secs(90), || async {
        let s = world.status(CLUSTER).await;
        find_condition(&s.conditions, FAILOVER_BLOCKED)
            .is_some_and(|c| c.status == "True" && c.message.contains(&standby))
    })
    .await;
    let s = world.status(CLUSTER).await;
    let blocked = find_condition(&s.conditions, FAILOVER_BLOCKED).expect("blocked");
    println!("blocked: {}", blocked.message);
    assert!(blocked.message.contains("bytes"), "{}", blocked.message);
    assert_eq!(
        s.target_primary.as_deref(),
        Some(primary.as_str()),
        "nothing is promoted without approval"
    );

    let id = s
        .failover
        .as_ref()
        .and_then(|f| f.blocked.as_ref())
        .map(|b| b.id.clone())
        .expect("the blocked decision's identity");
    assert!(blocked.message.contains(&id), "{}", blocked.message);

    // `tusk approve` names what awaits approval, and refuses to approve
    // anything but that decision.
    let (ok, listed) = tusk(&world, "approve", &[CLUSTER]);
    assert!(ok, "{listed}");
    assert!(
        listed.contains(&format!("kubectl tusk approve {CLUSTER} failover {id}"))
            && listed.contains(&format!("promoting {standby} in place of {primary}")),
        "{listed}"
    );
    let (ok, text) = tusk(&world, "approve", &[CLUSTER, "failover", "0123456789"]);
    assert!(!ok && text.contains(&format!("it is {id}")), "{text}");
    assert_eq!(
        world.status(CLUSTER).await.target_primary.as_deref(),
        Some(primary.as_str()),
        "a refused approval changes nothing"
    );

    // A switchover is no way around it, nor an approval that does not
    // quote the decision; the approval that does is.
    let (ok, text) = tusk_promote(&world, &[CLUSTER, &standby, "--wait", "0"]);
    assert!(!ok && text.contains("--accept-data-loss"), "{text}");
    let stale = json!({"metadata": {"annotations": {"tusk.dev/approve-data-loss": standby}}});
    world
        .clusters()
        .patch(
            CLUSTER,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&stale),
        )
        .await
        .expect("annotated");
    wait_for(
        "the approval that does not quote the decision is rejected",
        Duration::from_secs(30),
        || async {
            let s = world.status(CLUSTER).await;
            find_condition(&s.conditions, FAILOVER_BLOCKED)
                .is_some_and(|c| c.message.contains(&format!("it must say {id}")))
        },
    )
    .await;
    let s = world.status(CLUSTER).await;
    assert_eq!(s.target_primary.as_deref(), Some(primary.as_str()));
    assert!(s.last_failover.is_none(), "it approved nothing");
    let (ok, text) = tusk_promote(&world, &[CLUSTER, &standby, "--accept-data-loss"]);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!("tusk.dev/approve-data-loss={id}")),
        "{text}"
    );
    let s = world.status(CLUSTER).await;
    let record = s.last_failover.expect("recorded");
    assert_eq!(record.reason, "ApprovedFailover");
    assert_eq!(
        (record.from.as_str(), record.to.as_str()),
        (primary.as_str(), standby.as_str())
    );
    assert!(
        record.lsn_gap_bytes > 0,
        "the possible loss is recorded: {record:?}"
    );
    let point: Lsn = record
        .recovery_point
        .as_ref()
        .expect("a recovery point")
        .lsn
        .parse()
        .expect("an LSN");
    assert!(point < after, "{point} < {after}");
    assert!(find_condition(&s.conditions, FAILOVER_BLOCKED).is_none());
    let annotations = world
        .clusters()
        .get(CLUSTER)
        .await
        .expect("cluster")
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(
        !annotations.contains_key("tusk.dev/approve-data-loss"),
        "an approval is used once"
    );
    assert!(count_rows(&world, &format!("{CLUSTER}-rw"), CLUSTER).await >= 10);

    // The former primary, thawed, gives up what it alone had and follows.
    faults.thaw(NS, &primary, "postgres").expect("thaw");
    wait_for(
        "the former primary back as a standby",
        Duration::from_secs(180),
        || async {
            let s = world.status(CLUSTER).await;
            s.ready_instances == 2
                && s.instances
                    .iter()
                    .any(|i| i.name == primary && i.role == "replica" && i.ready)
        },
    )
    .await;
    world.shutdown().await;
}
