//! The PostgreSQL processes of one instance, found in `/proc`, and their
//! end by SIGKILL.
//!
//! PostgreSQL's children call `setsid()` (each is a process group and a
//! session of its own), so signalling the postmaster's process group
//! reaches no backend; and once the postmaster is dead they belong to
//! whoever adopts orphans. Two marks find them all the same:
//! - the working directory: the postmaster changes into its data
//!   directory and every child it forks inherits it (backends, walsenders,
//!   background workers, the archiver and the commands it runs). This
//!   needs the right to read `/proc/<pid>/cwd`: the same user as
//!   PostgreSQL (the watchdog runs as that user) or `CAP_SYS_PTRACE`.
//! - descent from a postmaster whose process id is known for sure (the
//!   manager's own child), read from `/proc/<pid>/stat`, which anyone may
//!   read: how a manager running as root without `CAP_SYS_PTRACE` finds
//!   them.
//!
//! A zombie (killed, not yet reaped) counts as gone: it runs no code and
//! holds no socket.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::reaper::{ProcStat, parse_stat};

/// A live process's `/proc/<pid>/stat`; `None` once it is gone or a zombie.
fn live_stat(pid: i32) -> Option<ProcStat> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&line).filter(|stat| !matches!(stat.state, 'Z' | 'X' | 'x'))
}

/// Every live process: (pid, parent).
fn live_processes() -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(live_stat)
        .collect()
}

/// `pgdata` as the kernel names a working directory (symbolic links
/// resolved).
fn resolved(pgdata: &Path) -> PathBuf {
    std::fs::canonicalize(pgdata).unwrap_or_else(|_| pgdata.to_owned())
}

/// The live processes of the instance whose data directory is `pgdata`:
/// those working in it, and `postmaster` with its descendants. Never the
/// calling process.
pub fn of_instance(pgdata: &Path, postmaster: Option<i32>) -> BTreeSet<i32> {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let home = resolved(pgdata);
    let all = live_processes();
    let mut found: BTreeSet<i32> = all
        .iter()
        .map(|stat| stat.pid)
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == home))
        .collect();
    if let Some(root) = postmaster.filter(|pid| all.iter().any(|s| s.pid == *pid)) {
        found.insert(root);
        let mut grew = true;
        while grew {
            let before = found.len();
            for stat in &all {
                if found.contains(&stat.parent) {
                    found.insert(stat.pid);
                }
            }
            grew = found.len() > before;
        }
    }
    found.remove(&me);
    found
}

/// Sends SIGKILL to every process in `pids`; how many took it.
pub fn kill_all(pids: &BTreeSet<i32>) -> usize {
    pids.iter()
        .filter(|pid| kill(Pid::from_raw(**pid), Signal::SIGKILL).is_ok())
        .count()
}

/// Which of `pids` still live.
pub fn still_alive(pids: &BTreeSet<i32>) -> BTreeSet<i32> {
    pids.iter()
        .copied()
        .filter(|pid| live_stat(*pid).is_some())
        .collect()
}

/// One round of a fence: every process of the instance (and any of
/// `known` still alive) killed. Returns the processes that were alive at
/// the start of the round; empty when the instance runs nothing.
pub fn sweep(pgdata: &Path, postmaster: Option<i32>, known: &BTreeSet<i32>) -> BTreeSet<i32> {
    let mut targets = of_instance(pgdata, postmaster);
    targets.extend(still_alive(known));
    kill_all(&targets);
    targets
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// Waits (bounded) until `pid` is no longer alive, reaping it.
    fn gone(child: &mut std::process::Child) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// A process working in the data directory, and its child in a
    /// session of its own (as PostgreSQL's backends are): both found and
    /// killed; a process working elsewhere is left alone.
    #[test]
    fn a_sweep_kills_what_works_in_the_data_directory_and_nothing_else() {
        let pgdata = tempfile::tempdir().expect("temp dir");
        let elsewhere = tempfile::tempdir().expect("temp dir");
        let sleeper = |dir: &Path| {
            Command::new("sleep")
                .arg("60")
                .current_dir(dir)
                .stdin(Stdio::null())
                .spawn()
                .expect("sleep")
        };
        let mut inside = sleeper(pgdata.path());
        let mut outside = sleeper(elsewhere.path());
        let inside_pid = i32::try_from(inside.id()).expect("pid");
        let outside_pid = i32::try_from(outside.id()).expect("pid");
        // `of_instance` may run before the child has changed directory.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut found = BTreeSet::new();
        while Instant::now() < deadline && !found.contains(&inside_pid) {
            found = of_instance(pgdata.path(), None);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(found.contains(&inside_pid), "{found:?}");
        assert!(!found.contains(&outside_pid), "{found:?}");
        let swept = sweep(pgdata.path(), None, &BTreeSet::new());
        assert!(swept.contains(&inside_pid));
        assert!(
            gone(&mut inside),
            "the process in the data directory is killed"
        );
        assert!(
            of_instance(pgdata.path(), None).is_empty(),
            "nothing is left"
        );
        assert!(matches!(outside.try_wait(), Ok(None)), "the other one runs");
        let _ = outside.kill();
        let _ = outside.wait();
    }

    /// Descendants of a known postmaster are found by descent alone.
    #[test]
    fn a_known_postmasters_descendants_are_found_wherever_they_work() {
        let elsewhere = tempfile::tempdir().expect("temp dir");
        let mut parent = Command::new("sh")
            .args(["-c", "sleep 60 & wait"])
            .current_dir(elsewhere.path())
            .stdin(Stdio::null())
            .spawn()
            .expect("sh");
        let root = i32::try_from(parent.id()).expect("pid");
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut found = BTreeSet::new();
        while Instant::now() < deadline && found.len() < 2 {
            found = of_instance(Path::new("/nonexistent/pgdata"), Some(root));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(found.len(), 2, "the shell and its sleep: {found:?}");
        let swept = sweep(Path::new("/nonexistent/pgdata"), Some(root), &found);
        assert_eq!(swept, found);
        assert!(gone(&mut parent));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !still_alive(&found).is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            still_alive(&found).is_empty(),
            "the orphaned sleep died too"
        );
    }
}
