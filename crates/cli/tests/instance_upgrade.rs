//! `tusk instance upgrade` (R27), run as the real binary in an upgrade
//! pod's environment (`tusk_api::upgrade`) on a PostgreSQL 15 data
//! directory: the outcome is written as JSON to `TUSK_UPGRADE_RESULT`,
//! and the exit code says whether the data is upgraded (0), a step failed
//! (1), or the upgrade could not run (2).
//!
//! PostgreSQL 16 comes from `scripts/setup` (`/opt/tusk/postgresql`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tusk_api::upgrade::{OLD_BIN_DIR_ENV, Outcome, RESULT_ENV, Step};
use tusk_instance::process_user::ProcessUser;

/// The longest one upgrade may take here.
const TIMEOUT: Duration = Duration::from_secs(180);

fn bin_dir(major: u32) -> PathBuf {
    let dir = tusk_instance::postgres::version::local_bin_dir(major);
    assert!(
        dir.join("pg_upgrade").is_file(),
        "PostgreSQL {major} is not installed in {}: run scripts/setup",
        dir.display()
    );
    dir
}

/// A volume holding a fresh, stopped PostgreSQL 15 cluster, the mounted
/// credentials and a run directory, as an upgrade pod has them.
struct Pod {
    root: tempfile::TempDir,
    user: ProcessUser,
}

impl Pod {
    async fn with_15_data() -> Self {
        let root = tempfile::Builder::new()
            .prefix("tk-up")
            .tempdir_in("/tmp")
            .expect("temporary directory");
        let user = ProcessUser::detect("postgres").expect("the postgres user (scripts/setup)");
        let volume = root.path().join("volume");
        user.private_dir(&volume).expect("the volume");
        user.give(root.path()).expect("the root given to postgres");
        for credential in ["superuser", "app", "replication"] {
            let dir = root.path().join("secrets").join(credential);
            std::fs::create_dir_all(&dir).expect("secret directory");
            let name = if credential == "superuser" {
                "postgres"
            } else {
                credential
            };
            std::fs::write(dir.join("username"), name).expect("username");
            std::fs::write(dir.join("password"), "secret").expect("password");
        }
        let pod = Pod { root, user };
        let initdb = pod
            .user
            .command(&bin_dir(15).join("initdb"))
            .arg("--pgdata")
            .arg(pod.pgdata())
            .args(["--encoding=UTF8", "--locale=C", "--username", "postgres"])
            .output();
        let output = tokio::time::timeout(TIMEOUT, initdb)
            .await
            .expect("initdb in time")
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        pod
    }

    fn pgdata(&self) -> PathBuf {
        self.root.path().join("volume/pgdata")
    }

    fn result_file(&self) -> PathBuf {
        self.root.path().join("termination-log")
    }

    fn pg_version(&self) -> String {
        std::fs::read_to_string(self.pgdata().join("PG_VERSION"))
            .expect("PG_VERSION")
            .trim()
            .to_owned()
    }

    /// `tusk instance upgrade` with the old major's programs in
    /// `old_bin`: how it exited, and the outcome it wrote.
    fn upgrade(&self, old_bin: Option<&Path>) -> (Option<i32>, Outcome) {
        let _ = std::fs::remove_file(self.result_file());
        let mut command = Command::new(env!("CARGO_BIN_EXE_tusk"));
        command
            .args(["instance", "upgrade"])
            .env_clear()
            .env("POD_NAME", "db-upgrade")
            .env("POD_NAMESPACE", "default")
            .env("CLUSTER_NAME", "db")
            .env("POD_IP", "127.0.0.1")
            .env("PGDATA", self.pgdata())
            .env("PG_BIN_DIR", bin_dir(16))
            .env("TUSK_RUN_DIR", self.root.path().join("run"))
            .env("TUSK_SECRETS_DIR", self.root.path().join("secrets"))
            .env(RESULT_ENV, self.result_file());
        if let Some(old_bin) = old_bin {
            command.env(OLD_BIN_DIR_ENV, old_bin);
        }
        let output = run_bounded(command);
        let written = std::fs::read_to_string(self.result_file()).unwrap_or_default();
        let outcome = Outcome::from_message(&written).unwrap_or_else(|| {
            panic!(
                "no outcome in `{written}`; printed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output.status.code(), outcome)
    }
}

fn run_bounded(mut command: Command) -> Output {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tusk starts");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("tusk instance upgrade still running after {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

#[tokio::test]
async fn the_pod_upgrades_the_volume_and_says_so_again_when_run_again() {
    let pod = Pod::with_15_data().await;
    let (code, outcome) = pod.upgrade(Some(&bin_dir(15)));
    assert_eq!(code, Some(0), "{outcome:?}");
    assert_eq!(outcome.failed_step, None);
    assert_eq!(
        (outcome.from_version, outcome.data_version),
        (Some(15), Some(16))
    );
    assert_eq!(pod.pg_version(), "16");

    let (code, again) = pod.upgrade(Some(&bin_dir(15)));
    assert_eq!(code, Some(0), "{again:?}");
    assert_eq!((again.failed_step, again.data_version), (None, Some(16)));
}

#[tokio::test]
async fn a_failed_step_exits_1_and_leaves_the_data_as_it_was() {
    let pod = Pod::with_15_data().await;
    // 16's programs cannot serve as the old cluster's.
    let (code, outcome) = pod.upgrade(Some(&bin_dir(16)));
    assert_eq!(code, Some(1), "{outcome:?}");
    assert_eq!(outcome.failed_step, Some(Step::Check));
    assert_eq!(outcome.data_version, Some(15));
    assert_eq!(pod.pg_version(), "15");
}

#[tokio::test]
async fn without_the_old_programs_the_pod_exits_2_saying_why() {
    let pod = Pod::with_15_data().await;
    let (code, outcome) = pod.upgrade(None);
    assert_eq!(code, Some(2), "{outcome:?}");
    assert_eq!(outcome.failed_step, Some(Step::Prepare));
    assert!(
        outcome.message.contains(OLD_BIN_DIR_ENV),
        "{}",
        outcome.message
    );
    assert_eq!(outcome.data_version, Some(15));
    assert_eq!(pod.pg_version(), "15");
}
