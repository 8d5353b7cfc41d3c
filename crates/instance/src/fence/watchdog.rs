//! The watchdog process (`tusk instance watchdog`): a plain loop on one
//! thread, no async runtime, no lock shared with the manager, reading the
//! heartbeat from its standard input (the memory file the manager
//! rewrites) and killing every PostgreSQL process of the instance once the
//! deadline there has passed.
//!
//! It blocks SIGTERM, SIGINT, SIGHUP and SIGQUIT: it leaves when its
//! manager is gone with nothing armed, or is killed with the pod. It runs
//! in a process group of its own, so a signal to the manager's group does
//! not reach it.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::getppid;

use super::decide::{Next, next};
use super::heartbeat::RECORD;
use super::{heartbeat, processes};

/// How long a fence goes on killing what it finds (a process in
/// uninterruptible sleep dies when its I/O ends) before it reports what
/// is left and leaves it to the next round.
const FENCE_LIMIT: Duration = Duration::from_secs(5);

/// Why the watchdog cannot run.
#[derive(Debug, thiserror::Error)]
pub enum WatchdogError {
    #[error("standard input is not the manager's heartbeat (a {RECORD}-byte memory file)")]
    NoHeartbeat,
}

/// Runs until the manager is gone with nothing armed.
pub fn run(pgdata: &Path, heartbeat_file: &File) -> Result<(), WatchdogError> {
    let regular = heartbeat_file.metadata().is_ok_and(|m| m.is_file());
    if !regular || heartbeat::read(heartbeat_file).is_none() {
        return Err(WatchdogError::NoHeartbeat);
    }
    let mut signals = SigSet::empty();
    for signal in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        signals.add(signal);
    }
    if let Err(error) = signals.thread_block() {
        tracing::warn!(%error, "the fence watchdog cannot block termination signals");
    }
    let manager = getppid();
    tracing::info!(pgdata = %pgdata.display(), manager = manager.as_raw(), "fence watchdog started");
    let mut fenced = None;
    loop {
        let read = heartbeat::read(heartbeat_file);
        match next(read, heartbeat::now(), getppid() != manager, fenced) {
            Next::Sleep(pause) => std::thread::sleep(pause),
            Next::Fence(deadline) => {
                let late = heartbeat::now().saturating_sub(deadline);
                fence(pgdata, late);
                fenced = Some(deadline);
            }
            Next::Exit => {
                tracing::info!("fence watchdog leaving: its manager is gone, nothing is armed");
                return Ok(());
            }
        }
    }
}

/// Kills every process of the instance, again and again, until none is
/// left or [`FENCE_LIMIT`] has passed.
fn fence(pgdata: &Path, late: Duration) {
    let started = Instant::now();
    let mut known = BTreeSet::new();
    let mut killed = BTreeSet::new();
    loop {
        let round = processes::sweep(pgdata, None, &known);
        if round.is_empty() {
            break;
        }
        killed.extend(round.iter().copied());
        known = round;
        if started.elapsed() >= FENCE_LIMIT {
            tracing::error!(
                remaining = ?known,
                "fence watchdog: processes of the instance survive SIGKILL"
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if killed.is_empty() {
        tracing::info!(
            late_ms = late.as_millis() as u64,
            "fence watchdog: the primary lease lapsed; no PostgreSQL process was running"
        );
    } else {
        tracing::error!(
            late_ms = late.as_millis() as u64,
            killed = ?killed,
            took_ms = started.elapsed().as_millis() as u64,
            "fence watchdog: the primary lease was not renewed in time; every PostgreSQL process of the instance killed"
        );
    }
}
