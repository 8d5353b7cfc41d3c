//! A harness running instance managers against real PostgreSQL 15.
//!
//! Every instance gets its own loopback address (127.0.x.y) and temporary
//! directories; all instances of one test share a PostgreSQL port, as pods
//! do. Dropping a [`TestInstance`] kills whatever it still runs, so a failed
//! test leaves no server behind.

#![allow(dead_code)]

pub mod api;
pub mod backups;
pub mod outage;
pub mod stores;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};
use tusk_api::instance::InstanceReport;
use tusk_instance::context::InstanceContext;
use tusk_instance::desired::DesiredState;
use tusk_instance::primacy::{Guard, Primacy};
use tusk_instance::run::{RunError, run_instance};
use tusk_instance::settings::{Credentials, Password, Settings, UserSecret};
use tusk_instance::state::SharedState;

pub const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
pub const SUPERUSER_PASSWORD: &str = "super-Secret-1";
pub const APP_PASSWORD: &str = "app-Secret-2";
pub const REPLICATION_PASSWORD: &str = "repl-Secret-3";

/// Test-only settings that keep tiny clusters fast; never used in
/// production rendering.
pub fn test_parameters() -> std::collections::BTreeMap<String, String> {
    [
        ("shared_buffers", "16MB"),
        ("max_connections", "30"),
        ("synchronous_commit", "on"),
        ("wal_keep_size", "64MB"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

static NEXT_NETWORK: AtomicU8 = AtomicU8::new(10);

/// A group of instances of one cluster: a loopback /24 and a shared port.
pub struct TestCluster {
    network: u8,
    next_host: u8,
    pub port: u16,
}

impl TestCluster {
    pub fn new() -> Self {
        assert!(
            std::path::Path::new(BIN_DIR).join("postgres").exists(),
            "PostgreSQL 15 is not installed in {BIN_DIR}: run scripts/setup"
        );
        let network = NEXT_NETWORK.fetch_add(1, Ordering::SeqCst) ^ (std::process::id() as u8);
        TestCluster {
            network,
            next_host: 1,
            port: free_port(),
        }
    }

    pub fn address(&self, host: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, self.network, host))
    }

    /// A stopped instance named `name`; start it with [`TestInstance::start`].
    pub fn instance(&mut self, name: &str) -> TestInstance {
        let host = self.next_host;
        self.next_host += 1;
        TestInstance::new(name, self.address(host), self.port)
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("a free port");
    listener.local_addr().expect("local address").port()
}

pub struct TestInstance {
    pub name: String,
    pub address: IpAddr,
    pub port: u16,
    pub http_port: u16,
    pub root: tempfile::TempDir,
    pub run_dir: tempfile::TempDir,
    pub settings: Settings,
    pub state: SharedState,
    desired: watch::Sender<Option<DesiredState>>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), RunError>>>,
}

fn secret(username: &str, password: &str) -> UserSecret {
    UserSecret {
        username: username.into(),
        password: Password::new(password),
    }
}

fn give_to_postgres(path: &std::path::Path) {
    let user = nix::unistd::User::from_name("postgres")
        .expect("user lookup")
        .expect("the postgres user exists (scripts/setup installs PostgreSQL)");
    nix::unistd::chown(path, Some(user.uid), Some(user.gid)).expect("chown to postgres");
}

/// A directory standing for a volume every instance of a test mounts
/// (a `file://` repository's), writable by the PostgreSQL user.
pub fn shared_volume() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("tusk-it-volume-")
        .tempdir()
        .expect("temporary directory");
    if nix::unistd::Uid::effective().is_root() {
        give_to_postgres(dir.path());
    }
    dir
}

impl TestInstance {
    fn new(name: &str, address: IpAddr, port: u16) -> Self {
        let root = tempfile::Builder::new()
            .prefix("tusk-it-")
            .tempdir()
            .expect("temporary directory");
        let run_dir = tempfile::Builder::new()
            .prefix("tk")
            .tempdir_in("/tmp")
            .expect("run directory");
        if nix::unistd::Uid::effective().is_root() {
            give_to_postgres(root.path());
        }
        let volume = root.path().join("volume");
        std::fs::create_dir(&volume).expect("volume directory");
        if nix::unistd::Uid::effective().is_root() {
            give_to_postgres(&volume);
        }
        let settings = Settings {
            pod_name: name.into(),
            namespace: "default".into(),
            cluster_name: "db".into(),
            pod_ip: address,
            pgdata: volume.join("pgdata"),
            bin_dir: PathBuf::from(BIN_DIR),
            run_dir: run_dir.path().to_owned(),
            postgres_port: port,
            http_port: free_port(),
            os_user: "postgres".into(),
            stop_timeout: Duration::from_secs(10),
            api_tls: false,
            credentials: Credentials {
                superuser: secret("postgres", SUPERUSER_PASSWORD),
                app_owner: secret("app", APP_PASSWORD),
                replication: secret("streaming_replica", REPLICATION_PASSWORD),
            },
            secrets_dir: PathBuf::from(tusk_api::contract::SECRETS_DIR),
            repository_keys: None,
            source_keys: None,
        };
        let (desired, _) = watch::channel(None);
        TestInstance {
            name: name.into(),
            address,
            port,
            http_port: settings.http_port,
            root,
            run_dir,
            settings,
            state: SharedState::default(),
            desired,
            shutdown: None,
            task: None,
        }
    }

    /// Starts the instance manager with `desired`.
    pub fn start(&mut self, desired: DesiredState) {
        self.desired.send_replace(Some(desired));
        let receiver = self.desired.subscribe();
        self.start_with(receiver);
    }

    /// Starts the instance manager with another source of desired state
    /// (the API watch).
    pub fn start_with(&mut self, receiver: watch::Receiver<Option<DesiredState>>) {
        self.start_with_primacy(receiver, |_| Primacy::unconditional());
    }

    /// [`TestInstance::start_with`], holding the primary lease of cluster
    /// `cluster` through `client`.
    pub fn start_leased(
        &mut self,
        receiver: watch::Receiver<Option<DesiredState>>,
        client: kube::Client,
        cluster: &str,
    ) {
        let me = self.settings.pod_name.clone();
        let cluster = cluster.to_owned();
        let guard = Guard {
            pgdata: self.settings.pgdata.clone(),
            watchdog: None,
        };
        self.start_with_primacy(receiver, |state| {
            Primacy::lease(client, "default", &cluster, &me, state, guard)
        });
    }

    fn start_with_primacy(
        &mut self,
        receiver: watch::Receiver<Option<DesiredState>>,
        primacy: impl FnOnce(SharedState) -> Primacy,
    ) {
        let ctx = InstanceContext::new(self.settings.clone()).expect("instance context");
        let (shutdown, stopped) = oneshot::channel::<()>();
        self.shutdown = Some(shutdown);
        self.state = SharedState::default();
        let state = self.state.clone();
        let primacy = primacy(state.clone());
        self.task = Some(tokio::spawn(run_instance(
            ctx,
            receiver,
            state,
            primacy,
            async {
                let _ = stopped.await;
            },
        )));
    }

    pub fn set_desired(&self, desired: DesiredState) {
        self.desired.send_replace(Some(desired));
    }

    /// Asks the manager to shut down and waits for it, at most `bound`.
    pub async fn stop(&mut self, bound: Duration) -> Duration {
        let started = Instant::now();
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(bound, task)
                .await
                .expect("the manager stops within its bound")
                .expect("manager task")
                .expect("manager run");
        }
        started.elapsed()
    }

    /// Crashes the instance as a lost node would: the manager's task is
    /// dropped mid-work, its postmaster and every backend killed
    /// (SIGKILL), and the data directory left as it was, not shut down
    /// cleanly.
    pub async fn crash(&mut self) {
        let pid = self.postmaster_pid();
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        self.shutdown = None;
        let pgdata = self.settings.pgdata.clone();
        let killed = tusk_instance::fence::processes::sweep(
            &pgdata,
            None,
            &std::collections::BTreeSet::new(),
        );
        let gone = |pid: i32| {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                None::<nix::sys::signal::Signal>,
            )
            .is_err()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while pid.is_some_and(|pid| !gone(pid)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            pid.is_none_or(gone),
            "the postmaster {pid:?} is gone (killed {killed:?})"
        );
    }

    pub fn postmaster_pid(&self) -> Option<i32> {
        self.state.snapshot().postmaster_pid
    }

    /// GET `path` on the instance's HTTP API: status code and body.
    pub async fn http_get(&self, path: &str) -> (u16, String) {
        let work = async {
            // The API may still be binding just after start.
            let mut stream = loop {
                match tokio::net::TcpStream::connect((self.address, self.http_port)).await {
                    Ok(stream) => break stream,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(e),
                }
            };
            stream
                .write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        let response = tokio::time::timeout(Duration::from_secs(10), work)
            .await
            .expect("HTTP answer in time")
            .expect("HTTP request");
        let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status code");
        (code, body.to_owned())
    }

    pub async fn status(&self) -> InstanceReport {
        let (code, body) = self.http_get("/status").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("a status report")
    }

    /// Writes a little and switches to a new WAL segment; the name of the
    /// segment that was finished.
    pub async fn finish_a_segment(&self) -> String {
        let client = self.superuser().await;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS t (v int); INSERT INTO t SELECT generate_series(1, 100)",
            )
            .await
            .expect("write");
        client
            .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
            .await
            .expect("switch")
            .get(0)
    }

    /// Switches WAL through `client` and waits, at most `timeout`, until
    /// this instance reports the segment it ended archived; its name.
    pub async fn switch_wal_until_archived(
        &self,
        client: &tokio_postgres::Client,
        timeout: Duration,
    ) -> String {
        let segment: String = client
            .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
            .await
            .expect("switch")
            .get(0);
        self.wait_status(&format!("{segment} archived"), timeout, |r| {
            r.archiving
                .as_ref()
                .and_then(|a| a.last_archived_wal.clone())
                .is_some_and(|archived| archived >= segment)
        })
        .await;
        segment
    }

    /// Polls `/status` until `check` holds, at most `timeout`.
    pub async fn wait_status(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&InstanceReport) -> bool,
    ) -> InstanceReport {
        let deadline = Instant::now() + timeout;
        loop {
            let report = self.status().await;
            if check(&report) {
                return report;
            }
            assert!(
                Instant::now() < deadline,
                "{}: timed out waiting for {what}; last status: {report:#?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls `/status` until its `lastError` mentions `naming`, at most
    /// `timeout`.
    pub async fn wait_refusal(&self, naming: &str, timeout: Duration) -> InstanceReport {
        self.wait_status("the refusal reported", timeout, |r| {
            r.last_error.as_deref().is_some_and(|e| e.contains(naming))
        })
        .await
    }

    /// A TCP connection with a password, as a client application would.
    pub async fn connect(
        &self,
        user: &str,
        password: &str,
        dbname: &str,
    ) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::Config::new()
            .host(self.address.to_string())
            .port(self.port)
            .user(user)
            .password(password)
            .dbname(dbname)
            .connect_timeout(Duration::from_secs(5))
            .connect(NoTls)
            .await?;
        tokio::spawn(connection);
        Ok(client)
    }

    pub async fn superuser(&self) -> Client {
        self.connect("postgres", SUPERUSER_PASSWORD, "postgres")
            .await
            .expect("superuser connection")
    }

    /// A superuser connection, or `None` while PostgreSQL is down.
    pub async fn superuser_if_up(&self) -> Option<Client> {
        self.connect("postgres", SUPERUSER_PASSWORD, "postgres")
            .await
            .ok()
    }

    pub async fn app(&self) -> Client {
        self.connect("app", APP_PASSWORD, "app")
            .await
            .expect("application connection")
    }
}

impl Drop for TestInstance {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        // The aborted task kills its postmaster (kill_on_drop); this covers
        // a runtime already gone.
        if let Some(pid) = self.state.snapshot().postmaster_pid {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Desired state of a cluster whose primary is `primary` at `address`.
pub fn desired(primary: &str, address: IpAddr) -> DesiredState {
    DesiredState {
        primary_address: Some(address),
        parameters: test_parameters(),
        // These tests administer PostgreSQL over TCP, as the superuser.
        superuser_access: true,
        ..DesiredState::new(Some(primary))
    }
}

/// Polls `check` until it returns `Some`, at most `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A primary the instance manager bootstrapped, holding `sql`'s data in
/// the `app` database, then stopped.
pub async fn stopped_primary_with(sql: &str) -> TestInstance {
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    db.start(desired("db-1", db.address));
    db.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    let app = db
        .connect("postgres", SUPERUSER_PASSWORD, "app")
        .await
        .expect("superuser in app");
    app.batch_execute(sql).await.expect("data written");
    db.stop(Duration::from_secs(30)).await;
    db
}

/// Where the programs of `major` are: PostgreSQL 15's from Debian, the
/// newer majors' from `scripts/setup` (`/opt/tusk/postgresql`).
pub fn installed_bin_dir(major: u32) -> PathBuf {
    let dir = tusk_postgres::version::local_bin_dir(major);
    assert!(
        dir.join("pg_upgrade").is_file(),
        "PostgreSQL {major} is not installed in {}: run scripts/setup",
        dir.display()
    );
    dir
}

/// The user PostgreSQL runs as.
pub fn postgres_user() -> tusk_instance::process_user::ProcessUser {
    tusk_instance::process_user::ProcessUser::detect("postgres")
        .expect("the postgres user (scripts/setup)")
}

/// Every log line of this test binary, as JSON at debug level, kept in
/// memory for the test to search (for credentials that must not be
/// there). The binary's only subscriber.
#[derive(Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLogs {
    pub fn install() -> Self {
        let captured = CapturedLogs::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_writer(move || writer.clone())
            .try_init()
            .expect("the only subscriber of this test binary");
        captured
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}
