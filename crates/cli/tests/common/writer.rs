//! Clients that write through a cluster's Services and the ledger they
//! fill: which commits were acknowledged, when, and whether every one of
//! them is still there after a fault.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{World, durable_cluster, tls, wait_for};

/// How long a [`Writer`] waits for a connection or a write by default.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

impl World {
    /// Creates the `ledger` table a [`Writer`] fills, through `-rw`. A
    /// session closed under it (the primary restarting as the last
    /// instance joins, on a loaded machine) is printed and tried again,
    /// for at most a minute.
    pub async fn create_ledger(&self, cluster: &str) {
        let service = format!("{cluster}-rw");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let created = self
                .connect(&service, cluster)
                .await
                .batch_execute("create table if not exists ledger (id bigint primary key)")
                .await;
            match created {
                Ok(()) => return,
                Err(error) if Instant::now() < deadline => {
                    println!("creating the ledger through {service} failed, tried again: {error}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(error) => panic!("the ledger through {service}: {error}"),
            }
        }
    }

    /// Creates the ledger and starts a [`Writer`] filling it through
    /// `-rw`, giving up on a connection attempt or a write after
    /// `timeout` (see [`Writer::start_with_timeout`]).
    pub async fn ledger_writer(&self, cluster: &str, timeout: Duration) -> Writer {
        self.create_ledger(cluster).await;
        Writer::start_with_timeout(self, &format!("{cluster}-rw"), cluster, "ledger", timeout).await
    }

    /// The acknowledged ids missing from the ledger, read through `-rw`,
    /// and how many rows it holds.
    pub async fn missing_from_ledger(
        &self,
        cluster: &str,
        acknowledged: &[i64],
    ) -> (Vec<i64>, usize) {
        let stored: Vec<i64> = self
            .connect(&format!("{cluster}-rw"), cluster)
            .await
            .query("select id from ledger order by id", &[])
            .await
            .expect("rows")
            .iter()
            .map(|r| r.get(0))
            .collect();
        let missing = acknowledged
            .iter()
            .copied()
            .filter(|id| stored.binary_search(id).is_err())
            .collect();
        (missing, stored.len())
    }

    /// A three-instance [`durable_cluster`] named `cluster`, replicating,
    /// with a [`Writer`] filling its ledger through `-rw` (20 writes
    /// acknowledged already), and the name of its primary.
    pub async fn durable_cluster_with_writer(
        &self,
        cluster: &str,
        delay_seconds: u64,
    ) -> (Writer, String) {
        self.create_cluster(cluster, durable_cluster(delay_seconds))
            .await;
        self.wait_replicating(cluster, 3).await;
        let writer = self.ledger_writer(cluster, WRITE_TIMEOUT).await;
        writer.wait_for_more(20, Duration::from_secs(60)).await;
        let primary = self
            .status(cluster)
            .await
            .current_primary
            .expect("a primary");
        (writer, primary)
    }
}

/// A client inserting numbered rows through a Service, one autocommit
/// statement each, reconnecting after every error, and recording which
/// commits were acknowledged. A failed attempt may still have committed;
/// an acknowledged one must never be lost.
pub struct Writer {
    stop: watch::Sender<bool>,
    acknowledged: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// When each acknowledgement arrived.
    times: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
    task: tokio::task::JoinHandle<Vec<i64>>,
}

impl Writer {
    /// Starts writing into `table` (which must exist, with a bigint `id`),
    /// giving up on a connection attempt or a write after
    /// [`WRITE_TIMEOUT`].
    pub async fn start(world: &World, service: &str, cluster: &str, table: &str) -> Self {
        Self::start_with_timeout(world, service, cluster, table, WRITE_TIMEOUT).await
    }

    /// As [`Writer::start`], giving up on a connection attempt or a write
    /// after `timeout`: a write or a connection stuck on a frozen primary
    /// holds the client that long, so the time without an acknowledged
    /// write is never shorter than it.
    pub async fn start_with_timeout(
        world: &World,
        service: &str,
        cluster: &str,
        table: &str,
        timeout: Duration,
    ) -> Self {
        Self::start_at(world.conninfo(service, cluster).await, table, timeout)
    }

    /// As [`Writer::start_with_timeout`], at the libpq connection string
    /// `conninfo` (a Service of a cluster outside the sandbox's world).
    pub fn start_at(conninfo: String, table: &str, timeout: Duration) -> Self {
        let insert = format!("insert into {table} (id) values ($1)");
        let (stop, stopped) = watch::channel(false);
        let acknowledged = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = acknowledged.clone();
        let times = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stamps = times.clone();
        let task = tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut client: Option<tokio_postgres::Client> = None;
            let mut next = 1_i64;
            while !*stopped.borrow() {
                let Some(connected) = client.as_ref() else {
                    let attempt = tokio_postgres::connect(&conninfo, tls::encrypted());
                    match tokio::time::timeout(timeout, attempt).await {
                        Ok(Ok((c, connection))) => {
                            tokio::spawn(connection);
                            client = Some(c);
                        }
                        _ => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                    continue;
                };
                let id = next;
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
                let write = connected.execute(insert.as_str(), &params);
                match tokio::time::timeout(timeout, write).await {
                    Ok(Ok(_)) => {
                        acked.push(next);
                        if let Ok(mut stamps) = stamps.lock() {
                            stamps.push(Instant::now());
                        }
                        count.store(acked.len(), std::sync::atomic::Ordering::SeqCst);
                    }
                    _ => client = None,
                }
                next += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            acked
        });
        Writer {
            stop,
            acknowledged,
            times,
            task,
        }
    }

    /// The longest time without an acknowledged write since `since`
    /// (counting from the last acknowledgement before it): the outage a
    /// client saw.
    pub fn longest_pause_since(&self, since: Instant) -> Duration {
        let Ok(times) = self.times.lock() else {
            return Duration::ZERO;
        };
        let start = times.partition_point(|t| *t < since);
        times[start.saturating_sub(1)..]
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    }

    /// When the first acknowledgement after `since` arrived.
    pub fn first_after(&self, since: Instant) -> Option<Instant> {
        let times = self.times.lock().ok()?;
        times.get(times.partition_point(|t| *t < since)).copied()
    }

    /// The longest time without an acknowledged write from `from` to
    /// `to` (counting from the last acknowledgement before `from` to the
    /// first after `to`).
    pub fn longest_pause_between(&self, from: Instant, to: Instant) -> Duration {
        let Ok(times) = self.times.lock() else {
            return Duration::ZERO;
        };
        let start = times.partition_point(|t| *t < from);
        let end = times.partition_point(|t| *t <= to);
        times[start.saturating_sub(1)..(end + 1).min(times.len())]
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    }

    /// Commits acknowledged so far.
    pub fn acknowledged(&self) -> usize {
        self.acknowledged.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until `more` commits beyond the current count are acknowledged.
    pub async fn wait_for_more(&self, more: usize, limit: Duration) {
        let target = self.acknowledged() + more;
        wait_for(&format!("{target} acknowledged writes"), limit, || async {
            self.acknowledged() >= target
        })
        .await;
    }

    /// Stops writing; the ids whose commit was acknowledged.
    pub async fn finish(self) -> Vec<i64> {
        let _ = self.stop.send(true);
        self.task.await.expect("writer task")
    }
}

/// Where the ids of a [`direct_writer`] start by default, apart from a
/// [`Writer`]'s.
pub const DIRECT_IDS: i64 = 1_000_000_000;

/// Writes numbered rows (from `first_id`) into `ledger` at `conninfo` only,
/// not through a Service, keeping one connection while it works and
/// reconnecting to the same server after an error, until `stop`; records
/// each acknowledged id and when its acknowledgement arrived.
pub fn direct_writer(
    conninfo: String,
    first_id: i64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(i64, Instant)>> {
    tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut client: Option<tokio_postgres::Client> = None;
        let mut next = first_id;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let Some(connected) = client.as_ref() else {
                let attempt = tokio_postgres::connect(&conninfo, tls::encrypted());
                if let Ok(Ok((c, connection))) =
                    tokio::time::timeout(Duration::from_secs(2), attempt).await
                {
                    tokio::spawn(connection);
                    client = Some(c);
                } else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                continue;
            };
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&next];
            let write = connected.execute("insert into ledger (id) values ($1)", &params);
            match tokio::time::timeout(Duration::from_secs(3), write).await {
                Ok(Ok(_)) => acked.push((next, Instant::now())),
                // A standby refuses writes: try again a little later.
                Ok(Err(_)) => {
                    client = None;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(_) => client = None,
            }
            next += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        acked
    })
}
