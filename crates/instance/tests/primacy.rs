//! Lease-held primacy with a real API server (the sandbox) and a real
//! PostgreSQL: a primary that cannot renew its lease stops acknowledging
//! writes before the lease can expire, and one whose lease another
//! instance holds stays stopped until the lease is free again.

mod common;

use common::api::{api_server, install_crds, pod_with_ip};

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::time::Instant;
use tusk_api::instance::{InstancePhase, InstanceRole};
use tusk_api::primacy::LeaseTiming;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_instance::cluster_watch;
use tusk_sandbox::Sandbox;

/// `spec.failover.delaySeconds` of the test cluster: a 2 s lease.
const DELAY_SECONDS: i32 = 2;

/// On `client`'s API server: the CRDs, a pod `db-1` at `address` and cluster `db`
/// whose target primary is `db-1`.
async fn declared_cluster(client: Client, address: &str) -> Client {
    install_crds(&client).await;
    pod_with_ip(&client, "db-1", address).await;
    let clusters: Api<PostgresCluster> = Api::namespaced(client.clone(), "default");
    let cluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": "db"},
        "spec": {
            "instances": 1,
            "postgres": {"version": 15, "parameters": common::test_parameters()},
            "storage": {"size": "1Gi"},
            "failover": {"delaySeconds": DELAY_SECONDS},
        },
    }))
    .expect("a cluster");
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("cluster created");
    clusters
        .patch_status(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"targetPrimary": "db-1"}})),
        )
        .await
        .expect("target primary set");
    client
}

/// Inserts a row every 20 ms through one established connection (a
/// client that kube-proxy keeps connected), reconnecting when it breaks,
/// and records when each insert was acknowledged.
fn writer(instance: &common::TestInstance, until: Instant) -> Arc<Mutex<Vec<SystemTime>>> {
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let acks = acknowledged.clone();
    let (address, port) = (instance.address.to_string(), instance.port);
    tokio::spawn(async move {
        let mut client = None;
        while Instant::now() < until {
            if client.is_none() {
                client = connect_app(&address, port).await;
            }
            if let Some(c) = &client {
                let insert = c.execute("INSERT INTO writes DEFAULT VALUES", &[]);
                match tokio::time::timeout(Duration::from_secs(1), insert).await {
                    Ok(Ok(_)) => acks.lock().expect("acks").push(SystemTime::now()),
                    _ => client = None,
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    acknowledged
}

async fn connect_app(address: &str, port: u16) -> Option<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::Config::new()
        .host(address)
        .port(port)
        .user("app")
        .password(common::APP_PASSWORD)
        .dbname("app")
        .connect_timeout(Duration::from_secs(1))
        .connect(tokio_postgres::NoTls)
        .await
        .ok()?;
    tokio::spawn(connection);
    Some(client)
}

async fn lease(client: &Client) -> Lease {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases.get("db-primary").await.expect("the primary lease")
}

fn renewed_at(lease: &Lease) -> SystemTime {
    let renew = lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .expect("a renew time");
    SystemTime::UNIX_EPOCH
        + Duration::from_micros(renew.0.as_microsecond().try_into().expect("after 1970"))
}

/// A running API server, cluster `db` declared in it, and its primary
/// `db-1` serving under the primary lease.
struct Serving {
    _dir: tempfile::TempDir,
    sandbox: Sandbox,
    _cluster: common::TestCluster,
    primary: common::TestInstance,
    client: Client,
}

async fn serving_leased_primary() -> Serving {
    common::init_logs();
    let (dir, sandbox, admin) = api_server().await;
    let mut cluster = common::TestCluster::new();
    let mut primary = cluster.instance("db-1");
    let client = declared_cluster(admin, &primary.address.to_string()).await;
    let desired = cluster_watch::start_with_client(
        client.clone(),
        "default",
        "db",
        "db-1",
        &tusk_api::contract::MountDirs::in_pod(),
    );
    primary.start_leased(desired, client.clone(), "db");
    primary
        .wait_status("a serving primary", Duration::from_secs(60), |r| r.ready)
        .await;
    Serving {
        _dir: dir,
        sandbox,
        _cluster: cluster,
        primary,
        client,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_cut_off_from_the_api_server_stops_acknowledging_writes_before_its_lease_expires()
{
    let Serving {
        _dir,
        mut sandbox,
        _cluster,
        mut primary,
        client,
    } = serving_leased_primary().await;
    let held = lease(&client).await;
    assert_eq!(
        held.spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref()),
        Some("db-1")
    );
    primary
        .app()
        .await
        .batch_execute("CREATE TABLE writes (id bigserial PRIMARY KEY)")
        .await
        .expect("table created");

    let timing = LeaseTiming::for_delay(DELAY_SECONDS);
    let acks = writer(&primary, Instant::now() + Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The last renewal the operator could have seen is no earlier than
    // this one: the lease cannot expire before `renewed + duration`.
    let renewed = renewed_at(&lease(&client).await);
    sandbox.stop();
    let cut = SystemTime::now();

    let report = primary
        .wait_status(
            "fenced for want of the lease",
            Duration::from_secs(10),
            |r| r.phase == InstancePhase::WaitingForLease && r.role == InstanceRole::Stopped,
        )
        .await;
    assert!(!report.ready);
    tokio::time::sleep(Duration::from_secs(9)).await;
    let acks = acks.lock().expect("acks").clone();
    let before = acks.iter().filter(|t| **t < cut).count();
    assert!(
        before > 10,
        "the writer wrote before the cut ({before} rows)"
    );
    let last = *acks.last().expect("acknowledged writes");
    let expiry = renewed + timing.duration;
    eprintln!(
        "last acknowledged write {:?} after the API server stopped; the lease expires no earlier than {:?} after it",
        last.duration_since(cut).unwrap_or_default(),
        expiry.duration_since(cut).unwrap_or_default(),
    );
    assert!(
        last < expiry,
        "a write was acknowledged {:?} after the lease could have expired",
        last.duration_since(expiry).unwrap_or_default()
    );
    primary.stop(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_lease_another_holds_stays_stopped_until_the_lease_is_free() {
    let Serving {
        _dir,
        sandbox: _sandbox,
        _cluster,
        mut primary,
        client,
    } = serving_leased_primary().await;

    // Another instance takes the lease over, as a new primary does.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let mut taken = lease(&client).await;
    if let Some(spec) = taken.spec.as_mut() {
        spec.holder_identity = Some("db-2".into());
        spec.lease_duration_seconds = Some(3600);
    }
    leases
        .replace("db-primary", &PostParams::default(), &taken)
        .await
        .expect("lease taken over");
    primary
        .wait_status(
            "stopped for want of the lease",
            Duration::from_secs(10),
            |r| r.phase == InstancePhase::WaitingForLease && r.role == InstanceRole::Stopped,
        )
        .await;
    let stays_down = Instant::now() + Duration::from_secs(3);
    while Instant::now() < stays_down {
        assert!(
            primary.superuser_if_up().await.is_none(),
            "PostgreSQL runs while another instance holds the lease"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Released: the manager takes the lease and serves again.
    let mut released = lease(&client).await;
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
    }
    leases
        .replace("db-primary", &PostParams::default(), &released)
        .await
        .expect("lease released");
    primary
        .wait_status("serving again", Duration::from_secs(30), |r| r.ready)
        .await;
    assert_eq!(
        lease(&client).await.spec.and_then(|s| s.holder_identity),
        Some("db-1".to_owned())
    );
    primary.stop(Duration::from_secs(30)).await;
}

/// A standby's view of a lease nobody renews, while every answer of the
/// API server takes longer than a renewal period: the server still
/// answers, so the standby must go on reporting it reachable (a standby
/// reported cut off is never chosen; were every standby so reported, a
/// failover could not happen at all on a busy control plane), and it
/// must stop following the silent holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_reading_a_silent_lease_from_a_slow_api_server_counts_it_reachable() {
    common::init_logs();
    let (_dir, sandbox, client) = api_server().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let timing = LeaseTiming::for_delay(DELAY_SECONDS);
    let held: Lease = serde_json::from_value(json!({
        "metadata": {"name": "db-primary"},
        "spec": {"holderIdentity": "db-1", "leaseDurationSeconds": timing.duration_seconds(),
                 "renewTime": k8s_openapi::jiff::Timestamp::now()},
    }))
    .expect("a lease");
    leases
        .create(&PostParams::default(), &held)
        .await
        .expect("lease created");
    let slow = timing.renew_every + Duration::from_millis(300);
    assert!(slow < timing.fence_after, "{slow:?} {timing:?}");
    sandbox.faults().set_delay(Some(slow));
    let state = tusk_instance::state::SharedState::default();
    let (sender, follow) = tokio::sync::watch::channel(tusk_instance::primacy::Follow::Nobody);
    let view = tusk_instance::primacy::view::LeaseWatch {
        api: leases.clone(),
        name: "db-primary".to_owned(),
        sender,
        state: state.clone(),
    };
    let task = tokio::spawn(view.run());
    // Past the first answers and the holder's fence time, then sampled.
    tokio::time::sleep(timing.duration * 2).await;
    let mut unreachable = 0;
    for _ in 0..20 {
        if state.lock().api_server_reachable != Some(true) {
            unreachable += 1;
        }
        tokio::time::sleep(timing.renew_every / 2).await;
    }
    let followed = follow.borrow().clone();
    task.abort();
    sandbox.faults().set_delay(None);
    assert_eq!(
        unreachable, 0,
        "answers taking {slow:?} were counted as no answer in {unreachable} of 20 samples"
    );
    assert_eq!(
        followed,
        tusk_instance::primacy::Follow::Nobody,
        "a holder that does not renew is not followed"
    );
}
