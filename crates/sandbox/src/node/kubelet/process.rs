//! A container's process: spawned in its own process group with its user,
//! environment, working directory and log file, signalled as a group, and
//! stopped gracefully (SIGTERM, a grace period, then SIGKILL).
//!
//! The process group stands for the container: PostgreSQL forks a backend
//! per connection, and stopping or freezing "the container" must reach all
//! of them. Dropping a [`Process`] kills its group, so no test or crashed
//! sandbox leaves programs behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

pub use super::exit::Exit;
use super::isolation::{IsolationError, TOKEN_MOUNT_PATH, TokenMount};
use super::logs::{LogSink, Stream, copy_output};

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot open the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{program} started without a process id")]
    NoPid { program: PathBuf },
    #[error(transparent)]
    Isolation(#[from] IsolationError),
    #[error(
        "cannot give the container its own view of {TOKEN_MOUNT_PATH} (a mount namespace{}): {source}",
        if *root { "" } else { " inside a user namespace, which this machine may not allow unprivileged users" }
    )]
    Namespace { root: bool, source: std::io::Error },
}

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct ProcessSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The whole environment; nothing is inherited from the sandbox.
    pub env: Vec<(String, String)>,
    pub working_dir: PathBuf,
    /// (uid, gid) to run as; `None` runs as the sandbox's own user.
    pub user: Option<(u32, u32)>,
    /// stdout and stderr are appended here, in the CRI log format.
    pub log: PathBuf,
    /// The host directory shown at the ServiceAccount token path, in a
    /// mount namespace of the process's own (see `isolation`).
    pub token_dir: Option<PathBuf>,
    /// Whether the sandbox runs as root (a user namespace is needed
    /// otherwise).
    pub root: bool,
}

/// A running (or finished) container process.
#[derive(Debug)]
pub struct Process {
    child: tokio::process::Child,
    pid: i32,
    started: Instant,
    exit: Option<Exit>,
    /// The tasks copying stdout and stderr into the log.
    output: Vec<tokio::task::JoinHandle<()>>,
}

fn open_log(path: &Path) -> Result<std::fs::File, ProcessError> {
    let log = |source| ProcessError::Log {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(log)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(log)
}

/// The command that runs `spec` the way a container's processes run: its
/// program, arguments, whole environment, working directory, user, a
/// process group of its own and, when it mounts the ServiceAccount token,
/// a mount namespace of its own (see `isolation`). Container processes and
/// `pods/exec` commands are both built here, so exec sessions see what the
/// container sees. Also says whether the command is isolated.
pub fn container_command(
    spec: &ProcessSpec,
) -> Result<(tokio::process::Command, bool), ProcessError> {
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.working_dir)
        .process_group(0);
    let isolated = match &spec.token_dir {
        Some(dir) => {
            let mount = TokenMount::new(dir, spec.user, spec.root)?;
            // SAFETY: `enter` only makes system calls on values
            // prepared before fork (no allocation, no locks).
            #[allow(unsafe_code)]
            unsafe {
                command.pre_exec(move || mount.enter());
            }
            true
        }
        None => {
            if let Some((uid, gid)) = spec.user {
                // std drops supplementary groups when a root parent sets a uid.
                command.uid(uid).gid(gid);
            }
            false
        }
    };
    Ok((command, isolated))
}

impl Process {
    /// Starts `spec` with its stdout and stderr copied, line by line, into
    /// its CRI log file (see [`super::logs`]).
    pub fn spawn(spec: &ProcessSpec) -> Result<Self, ProcessError> {
        let sink = LogSink::new(open_log(&spec.log)?);
        let (mut command, isolated) = container_command(spec)?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|source| {
            // With a program that exists, the error came from the child's
            // setup before exec.
            if isolated && spec.program.is_file() {
                ProcessError::Namespace {
                    root: spec.root,
                    source,
                }
            } else {
                ProcessError::Spawn {
                    program: spec.program.clone(),
                    source,
                }
            }
        })?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| ProcessError::NoPid {
                program: spec.program.clone(),
            })?;
        let mut output = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            output.push(tokio::spawn(copy_output(
                stdout,
                Stream::Stdout,
                sink.clone(),
            )));
        }
        if let Some(stderr) = child.stderr.take() {
            output.push(tokio::spawn(copy_output(stderr, Stream::Stderr, sink)));
        }
        Ok(Self {
            child,
            pid,
            started: Instant::now(),
            exit: None,
            output,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn running_for(&self) -> Duration {
        self.started.elapsed()
    }

    /// Sends `signal` to every process of the container. A group that is
    /// already gone is not an error.
    pub fn signal(&self, signal: Signal) {
        signal_tree(self.pid, signal);
    }

    /// Waits for the main process to end.
    pub async fn wait(&mut self) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let exit = match self.child.wait().await {
            Ok(status) => Exit::from_status(status),
            Err(_) => Exit {
                code: -1,
                signal: None,
                oom_killed: false,
            },
        };
        // Children left behind by the main process go with it.
        self.signal(Signal::SIGKILL);
        // The log is complete before the exit is reported, so a reader that
        // sees the container end has seen all its output. A descendant that
        // escaped the kill and holds the pipe cannot delay this for long.
        for task in self.output.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        self.exit = Some(exit);
        exit
    }

    /// SIGTERM (and SIGCONT, so a frozen process can act on it), up to
    /// `grace` to exit, then SIGKILL.
    ///
    /// Every process of the container goes, as with a pod's PID namespace
    /// on a real node: the tree is taken while the leader still links it,
    /// so a descendant in a session of its own that outlives the leader
    /// (a program's watchdog, which ignores SIGTERM) is killed too, though
    /// the leader's exit has handed it to init by then.
    pub async fn stop(&mut self, grace: Duration) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let tree = identified(descendants(self.pid));
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
        let exit = match tokio::time::timeout(grace, self.wait()).await {
            Ok(exit) => exit,
            Err(_) => {
                self.signal(Signal::SIGKILL);
                self.wait().await
            }
        };
        for (pid, ticks) in tree {
            if start_ticks(pid) == Some(ticks) {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        exit
    }
}

/// Signals a container's process group by its leader's pid.
pub fn signal_group(pid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pid), signal);
}

/// Signals a container's processes: its leader's group and every process
/// descending from the leader. Programs may start children in sessions of
/// their own (PostgreSQL does, for every backend), so the group alone is
/// not the container; the tree is, as a cgroup is on a real node.
pub fn signal_tree(pid: i32, signal: Signal) {
    let descendants = descendants(pid);
    signal_group(pid, signal);
    for descendant in descendants {
        let _ = nix::sys::signal::kill(Pid::from_raw(descendant), signal);
    }
}

/// Signals the processes of a container (its leader and every descendant)
/// whose command line, arguments joined by spaces, `chosen` picks, and
/// only those (no process group): part of a container can hang while the
/// rest runs on, as PostgreSQL's backends do under a stuck postmaster.
/// Returns how many were signalled.
pub fn signal_chosen(pid: i32, signal: Signal, chosen: impl Fn(&str) -> bool) -> usize {
    let mut tree = vec![pid];
    tree.extend(descendants(pid));
    tree.into_iter()
        .filter(|process| crate::procfs::command_line(*process).is_some_and(|line| chosen(&line)))
        .filter(|process| nix::sys::signal::kill(Pid::from_raw(*process), signal).is_ok())
        .count()
}

/// Every process descending from `root`, from `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    for pid in crate::procfs::pids() {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Field 4, after the parenthesised command name.
        let ppid = stat
            .rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        index += 1;
    }
    found.remove(0);
    found
}

/// `pids` with their start times, so that each names one process later.
fn identified(pids: Vec<i32>) -> Vec<(i32, u64)> {
    pids.into_iter()
        .filter_map(|pid| Some((pid, start_ticks(pid)?)))
        .collect()
}

/// When a process started, in clock ticks since boot (`/proc/<pid>/stat`
/// field 22): with the pid, it names one process even after pids wrap.
fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Records a running container's process in `file`, so a sandbox that was
/// killed without stopping its containers can stop them on its next start.
pub fn record(file: &Path, pid: i32) {
    if let Some(ticks) = start_ticks(pid) {
        let _ = std::fs::write(file, format!("{pid} {ticks}\n"));
    }
}

/// Kills the process group recorded in `file` if that very process still
/// runs (same pid and start time), waits for it to go, and removes the
/// record.
pub async fn kill_recorded(file: &Path) {
    let recorded = std::fs::read_to_string(file).ok().and_then(|text| {
        let mut words = text.split_whitespace();
        let pid: i32 = words.next()?.parse().ok()?;
        let ticks: u64 = words.next()?.parse().ok()?;
        Some((pid, ticks))
    });
    if let Some((pid, ticks)) = recorded
        && start_ticks(pid) == Some(ticks)
    {
        signal_tree(pid, Signal::SIGCONT);
        signal_tree(pid, Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while start_ticks(pid) == Some(ticks) && !is_zombie(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let _ = std::fs::remove_file(file);
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after_name = stat[stat.rfind(')')? + 1..].to_owned();
            after_name
                .split_whitespace()
                .next()
                .map(|state| state == "Z")
        })
        .unwrap_or(true)
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.signal(Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests;
