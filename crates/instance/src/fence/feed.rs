//! The manager's side of the watchdog: start it (again, if it died) and
//! write it the deadline after every renewal of the primary lease.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::memfd::{MFdFlags, memfd_create};
use tokio::process::Child;
use tokio::time::Instant;

use super::decide::Heartbeat;
use super::heartbeat;
use crate::process_user::ProcessUser;

/// The arguments that start the watchdog, after the program.
pub const WATCHDOG_ARGS: [&str; 2] = ["instance", "watchdog"];

/// The manager's environment the watchdog keeps: how to log, and the
/// names its log lines carry.
const PASSED_ENV: [&str; 4] = [
    "TUSK_LOG_FORMAT",
    tusk_api::contract::InstanceEnv::CLUSTER_NAME,
    tusk_api::contract::InstanceEnv::POD_NAMESPACE,
    tusk_api::contract::InstanceEnv::POD_NAME,
];

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("cannot make the watchdog's heartbeat file: {0}")]
    Memfd(nix::Error),
    #[error("cannot write the watchdog's heartbeat: {0}")]
    Write(std::io::Error),
    #[error("cannot start the fence watchdog {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// A running watchdog and the heartbeat it reads.
pub struct Watchdog {
    heartbeat: File,
    program: PathBuf,
    pgdata: PathBuf,
    user: ProcessUser,
    child: Option<Child>,
}

impl Watchdog {
    /// Starts `program instance watchdog --pgdata <pgdata>` as the
    /// PostgreSQL user (so that it may read where PostgreSQL's processes
    /// work and kill them), disarmed.
    pub fn start(program: &Path, pgdata: &Path, user: &ProcessUser) -> Result<Self, FeedError> {
        let fd = memfd_create("tusk-fence-heartbeat", MFdFlags::MFD_CLOEXEC)
            .map_err(FeedError::Memfd)?;
        let heartbeat = File::from(fd);
        heartbeat::write(&heartbeat, Heartbeat::Disarmed).map_err(FeedError::Write)?;
        let mut watchdog = Watchdog {
            heartbeat,
            program: program.to_owned(),
            pgdata: pgdata.to_owned(),
            user: user.clone(),
            child: None,
        };
        watchdog.spawn()?;
        Ok(watchdog)
    }

    fn spawn(&mut self) -> Result<(), FeedError> {
        let failed = |source| FeedError::Spawn {
            program: self.program.display().to_string(),
            source,
        };
        let input = self.heartbeat.try_clone().map_err(failed)?;
        let mut command = self.user.command(&self.program);
        command
            .args(WATCHDOG_ARGS)
            .arg("--pgdata")
            .arg(&self.pgdata)
            .stdin(Stdio::from(input))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            // A manager that dies or panics leaves it running: the last
            // deadline it was given still stands.
            .kill_on_drop(false)
            // Out of reach of a signal to the manager's process group.
            .process_group(0);
        // Its log lines name the instance as the manager's do.
        for name in PASSED_ENV {
            if let Ok(value) = std::env::var(name) {
                command.env(name, value);
            }
        }
        let child = command.spawn().map_err(failed)?;
        tracing::info!(pid = ?child.id(), "fence watchdog started");
        self.child = Some(child);
        Ok(())
    }

    /// The watchdog's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Starts the watchdog again if it is no longer running.
    fn keep_running(&mut self) {
        let exited = match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => return,
            Some(Ok(Some(status))) => status.to_string(),
            Some(Err(error)) => error.to_string(),
            // Its start failed at the last renewal and was reported then.
            None => {
                let _ = self.spawn();
                return;
            }
        };
        tracing::error!(%exited, "the fence watchdog is not running; starting it again");
        if let Err(error) = self.spawn() {
            self.child = None;
            tracing::error!(%error, "the primary is fenced by its manager alone until the watchdog starts");
        }
    }

    /// The lease is held until `until`: past it, the watchdog kills
    /// PostgreSQL.
    pub fn arm(&mut self, until: Instant) {
        self.keep_running();
        let now = Instant::now();
        let clock = heartbeat::now();
        let deadline = if until >= now {
            clock + (until - now)
        } else {
            clock.saturating_sub(now - until)
        };
        self.write(Heartbeat::Until(deadline));
    }

    /// No lease held that PostgreSQL runs under: nothing to fence.
    pub fn disarm(&mut self) {
        self.write(Heartbeat::Disarmed);
    }

    fn write(&self, heartbeat: Heartbeat) {
        if let Err(error) = heartbeat::write(&self.heartbeat, heartbeat) {
            tracing::error!(%error, "cannot write the fence watchdog's heartbeat");
        }
    }
}
