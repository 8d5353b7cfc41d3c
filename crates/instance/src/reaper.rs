//! The duties of PID 1. The instance manager is its container's first
//! process, so processes orphaned inside the container (the backends of a
//! postmaster that was killed, say) become its children; unless someone
//! waits for them they stay zombies forever.
//!
//! The reaper waits only for zombies it has seen in two scans in a row: a
//! child the manager itself started and is about to wait for (through
//! tokio) is reaped within milliseconds of its exit, so it is never taken
//! from its owner. The supervised postmaster is never touched.

use std::collections::HashSet;
use std::time::Duration;

use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::state::SharedState;

/// How often the reaper scans when the manager is PID 1.
pub const SCAN_INTERVAL: Duration = Duration::from_secs(10);

/// One line of `/proc/<pid>/stat`: process id, state and parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub parent: i32,
}

/// Parses `/proc/<pid>/stat`. The command name is in parentheses and may
/// itself contain spaces and parentheses, so the fields after it are found
/// from the last `)`.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let (head, tail) = line.rsplit_once(')')?;
    let pid = head.split_once(" (")?.0.trim().parse().ok()?;
    let mut fields = tail.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some(ProcStat { pid, state, parent })
}

/// Zombie children of `parent`.
fn zombie_children(parent: i32) -> HashSet<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter_map(|line| parse_stat(&line))
        .filter(|stat| stat.state == 'Z' && stat.parent == parent)
        .map(|stat| stat.pid)
        .collect()
}

/// Reaps orphaned zombies every `interval`, forever.
pub async fn run(interval: Duration, state: SharedState) {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let mut previous: HashSet<i32> = HashSet::new();
    loop {
        tokio::time::sleep(interval).await;
        let current = zombie_children(me);
        let postmaster = state.snapshot().postmaster_pid;
        for &pid in current.intersection(&previous) {
            if Some(pid) == postmaster {
                continue;
            }
            if let Ok(status) = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
                tracing::debug!(pid, ?status, "reaped an orphaned process");
            }
        }
        previous = current;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_are_parsed_past_odd_command_names() {
        let cases = [
            ("42 (postgres) Z 1 42 42 0 -1", Some(('Z', 42, 1))),
            ("7 (postgres: walwriter ) S 3 7 7", Some(('S', 7, 3))),
            ("9 (a) b (c)) R 2 9 9", Some(('R', 9, 2))),
            ("garbage", None),
            ("x (y) Z notanumber", None),
        ];
        for (line, expected) in cases {
            let parsed = parse_stat(line).map(|s| (s.state, s.pid, s.parent));
            assert_eq!(parsed, expected, "{line}");
        }
    }
}
