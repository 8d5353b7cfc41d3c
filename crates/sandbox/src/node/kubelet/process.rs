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
    pub async fn stop(&mut self, grace: Duration) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
        match tokio::time::timeout(grace, self.wait()).await {
            Ok(exit) => exit,
            Err(_) => {
                self.signal(Signal::SIGKILL);
                self.wait().await
            }
        }
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
        .filter(|process| command_line(*process).is_some_and(|line| chosen(&line)))
        .filter(|process| nix::sys::signal::kill(Pid::from_raw(*process), signal).is_ok())
        .count()
}

/// A process's arguments joined by spaces (PostgreSQL's children rewrite
/// theirs, e.g. `postgres: walsender ...`).
fn command_line(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    Some(words.join(" "))
}

/// Every process descending from `root`, from `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
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
mod tests {
    use super::*;

    fn shell(script: &str, dir: &Path) -> ProcessSpec {
        ProcessSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("GREETING".into(), "hello".into())],
            working_dir: dir.to_owned(),
            user: None,
            log: dir.join("logs/main/0.log"),
            token_dir: None,
            root: false,
        }
    }

    #[tokio::test]
    async fn output_env_and_working_dir_reach_the_process() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = shell("echo $GREETING; pwd; echo oops >&2; exit 3", dir.path());
        let mut process = Process::spawn(&spec).expect("spawn");
        let exit = tokio::time::timeout(Duration::from_secs(10), process.wait())
            .await
            .expect("exits in time");
        assert_eq!(
            exit,
            Exit {
                code: 3,
                signal: None,
                oom_killed: false,
            }
        );
        let log = std::fs::read(&spec.log).expect("log");
        let (entries, _) = super::super::logs::read::parse_entries(&log);
        let lines: Vec<(Stream, String)> = entries
            .iter()
            .map(|e| (e.stream, String::from_utf8_lossy(&e.content).into_owned()))
            .collect();
        let canonical = dir.path().canonicalize().expect("canonical");
        let stdout: Vec<&str> = lines
            .iter()
            .filter(|(s, _)| *s == Stream::Stdout)
            .map(|(_, l)| l.as_str())
            .collect();
        assert_eq!(stdout, vec!["hello", &*canonical.display().to_string()]);
        assert!(lines.contains(&(Stream::Stderr, "oops".to_owned())));
    }

    #[tokio::test]
    async fn graceful_stop_lets_a_trapping_process_finish() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = shell(
            "trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.1; done",
            dir.path(),
        );
        let mut process = Process::spawn(&spec).expect("spawn");
        wait_for_log(&spec.log, "up").await;
        let exit = process.stop(Duration::from_secs(10)).await;
        assert_eq!(exit.code, 0);
        assert!(
            std::fs::read_to_string(&spec.log)
                .expect("log")
                .contains("bye")
        );
    }

    #[tokio::test]
    async fn a_process_ignoring_sigterm_is_killed_after_the_grace_period() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = shell(
            "trap '' TERM; echo up; while :; do sleep 0.1; done",
            dir.path(),
        );
        let mut process = Process::spawn(&spec).expect("spawn");
        wait_for_log(&spec.log, "up").await;
        let started = Instant::now();
        let exit = process.stop(Duration::from_millis(500)).await;
        assert_eq!(exit.signal, Some(9));
        assert_eq!(exit.code, 137);
        assert!(started.elapsed() >= Duration::from_millis(500));
    }

    #[tokio::test]
    async fn dropping_a_process_kills_its_whole_group() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pid_file = dir.path().join("child.pid");
        let spec = shell(
            &format!("sleep 60 & echo $! > {}; echo up; wait", pid_file.display()),
            dir.path(),
        );
        let process = Process::spawn(&spec).expect("spawn");
        wait_for_log(&spec.log, "up").await;
        let child: i32 = std::fs::read_to_string(&pid_file)
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid");
        drop(process);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{child}")).exists() && !is_zombie(child) {
            assert!(
                Instant::now() < deadline,
                "child {child} outlived its container"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn only_the_chosen_processes_of_a_container_are_signalled() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pids = dir.path().join("pids");
        let spec = shell(
            &format!(
                "sleep 61 & echo $! > {0}; sleep 62 & echo $! >> {0}; echo up; wait",
                pids.display()
            ),
            dir.path(),
        );
        let process = Process::spawn(&spec).expect("spawn");
        wait_for_log(&spec.log, "up").await;
        let children: Vec<i32> = std::fs::read_to_string(&pids)
            .expect("pid file")
            .lines()
            .map(|l| l.trim().parse().expect("pid"))
            .collect();
        let state = |pid: i32| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
            stat[stat.rfind(')').expect("name") + 2..]
                .chars()
                .next()
                .expect("state")
        };
        let stopped = signal_chosen(process.pid(), Signal::SIGSTOP, |line| {
            line.ends_with("sleep 61")
        });
        assert_eq!(stopped, 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while state(children[0]) != 'T' {
            assert!(Instant::now() < deadline, "sleep 61 never stopped");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_ne!(state(children[1]), 'T', "sleep 62 runs on");
        assert_ne!(state(process.pid()), 'T', "the shell runs on");
        signal_tree(process.pid(), Signal::SIGCONT);
    }

    #[tokio::test]
    async fn a_recorded_process_left_by_a_killed_sandbox_is_stopped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = shell("echo up; exec sleep 60", dir.path());
        let process = Process::spawn(&spec).expect("spawn");
        let pid = process.pid();
        let record_file = dir.path().join("pid");
        record(&record_file, pid);
        // As if the sandbox died: nothing stops the process.
        std::mem::forget(process);
        assert!(!is_zombie(pid), "the process runs");
        kill_recorded(&record_file).await;
        assert!(
            is_zombie(pid) || start_ticks(pid).is_none(),
            "the leftover process is gone"
        );
        assert!(!record_file.exists());
        // A record naming a process that no longer exists is only removed.
        std::fs::write(&record_file, format!("{pid} 1\n")).expect("write");
        kill_recorded(&record_file).await;
        assert!(!record_file.exists());
    }

    /// Runs `script` with `dir/token` shown at the token path; its output.
    async fn run_isolated(
        dir: &Path,
        user: Option<(u32, u32)>,
        root: bool,
        script: &str,
    ) -> String {
        let volume = dir.join("volume");
        std::fs::create_dir_all(&volume).expect("volume");
        std::fs::write(volume.join("token"), "t0ken").expect("token");
        let mut spec = shell(script, dir);
        spec.token_dir = Some(volume);
        spec.user = user;
        spec.root = root;
        let mut process = Process::spawn(&spec).expect("spawn");
        let exit = tokio::time::timeout(Duration::from_secs(10), process.wait())
            .await
            .expect("exits in time");
        let log = std::fs::read_to_string(&spec.log).expect("log");
        assert!(exit.success(), "{exit:?}: {log}");
        let text = |line: &str| line.splitn(4, ' ').nth(3).map(|t| format!("{t}\n")); // CRI
        log.lines().filter_map(text).collect()
    }

    const READ_TOKEN: &str = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; \
        if echo x > /var/run/secrets/kubernetes.io/serviceaccount/token; then echo writable; else echo read-only; fi 2>/dev/null; \
        id -u";

    fn host_sees_the_mount() -> bool {
        std::fs::read_to_string("/proc/self/mountinfo")
            .expect("mountinfo")
            .contains("kubernetes.io/serviceaccount")
    }

    #[tokio::test]
    async fn a_process_sees_its_token_at_the_fixed_path_and_the_host_does_not() {
        if !nix::unistd::geteuid().is_root() {
            // Covered by the user namespace test below.
            return;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let nobody = nix::unistd::User::from_name("nobody")
            .ok()
            .flatten()
            .map_or(65534, |u| u.uid.as_raw());
        let log = run_isolated(dir.path(), Some((nobody, nobody)), true, READ_TOKEN).await;
        assert_eq!(log, format!("t0ken\nread-only\n{nobody}\n"));
        assert!(!host_sees_the_mount());
        assert!(
            !Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists(),
            "nothing is left on the host's path"
        );
    }

    #[tokio::test]
    async fn without_root_a_user_namespace_gives_the_same_view() {
        if !Path::new("/var/run/secrets").is_dir() {
            // Only root can create it; as root, the other test does.
            let _ = std::fs::create_dir_all("/var/run/secrets");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let me = nix::unistd::geteuid().as_raw();
        match TokenMount::new(&dir.path().join("volume"), None, false) {
            Err(IsolationError::NoSecretsDir) => return,
            Err(error) => panic!("{error}"),
            Ok(_) => {}
        }
        let log = run_isolated(dir.path(), None, false, READ_TOKEN).await;
        assert!(log.starts_with("t0ken\n"), "{log}");
        assert!(log.ends_with(&format!("{me}\n")), "the same user: {log}");
        assert!(!host_sees_the_mount());
    }

    async fn wait_for_log(path: &Path, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::fs::read_to_string(path).is_ok_and(|log| log.contains(text)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{text:?} never appeared in {}",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
