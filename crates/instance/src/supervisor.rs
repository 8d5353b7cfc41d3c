//! Running `postgres` as a child process: start it, turn its log output into
//! structured log events, notice when it exits, and stop it within a bound
//! (fast shutdown, then immediate, then kill).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Child;

use tusk_postgres::recovery_log::RecoveryLog;

use crate::process_user::ProcessUser;
use crate::state::SharedState;

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("postgres started without a process id")]
    NoPid,
    #[error("cannot wait for postgres: {0}")]
    Wait(std::io::Error),
}

/// How a stop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopOutcome {
    /// Fast shutdown finished in time: a clean shutdown checkpoint.
    Fast,
    /// Fast shutdown took too long; an immediate shutdown was needed (crash
    /// recovery happens at the next start).
    Immediate,
    /// Nothing answered; the process was killed.
    Killed,
    /// It had already exited.
    AlreadyExited,
}

/// A running postmaster.
#[derive(Debug)]
pub struct Postmaster {
    child: Child,
    pid: Pid,
    /// Its data directory, where its children work too.
    pgdata: std::path::PathBuf,
    /// How an archive recovery ended, as its log says.
    recovery: Arc<Mutex<RecoveryLog>>,
}

impl Postmaster {
    /// Starts `postgres -D <pgdata>` with extra `-c name=value` settings;
    /// with `state`, the errors its `archive_command` printed are kept
    /// there ([`ManagerState::archive_push_error`](crate::state::ManagerState)).
    pub fn start(
        user: &ProcessUser,
        bin_dir: &Path,
        pgdata: &Path,
        extra_settings: &[(&str, &str)],
        env: &[(&str, &str)],
        state: Option<SharedState>,
    ) -> Result<Self, SupervisorError> {
        let program = bin_dir.join("postgres");
        let mut command = user.command(&program);
        command.arg("-D").arg(pgdata).envs(env.iter().copied());
        for (name, value) in extra_settings {
            command.arg("-c").arg(format!("{name}={value}"));
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|source| SupervisorError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        let raw_pid = child.id().ok_or(SupervisorError::NoPid)?;
        let pid = Pid::from_raw(i32::try_from(raw_pid).map_err(|_| SupervisorError::NoPid)?);
        let recovery = Arc::new(Mutex::new(RecoveryLog::default()));
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(forward_log(stderr, state.clone(), recovery.clone()));
        }
        if let Some(stdout) = child.stdout.take() {
            tokio::spawn(forward_log(stdout, state, recovery.clone()));
        }
        tracing::info!(pid = pid.as_raw(), pgdata = %pgdata.display(), "postgres started");
        Ok(Postmaster {
            child,
            pid,
            pgdata: pgdata.to_owned(),
            recovery,
        })
    }

    /// What its log said so far about how an archive recovery ended.
    pub fn recovery_log(&self) -> RecoveryLog {
        self.recovery
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Resolves when the postmaster exits. Cancel-safe.
    pub async fn exited(&mut self) -> Result<ExitStatus, SupervisorError> {
        self.child.wait().await.map_err(SupervisorError::Wait)
    }

    /// True when the postmaster has exited.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops PostgreSQL: fast shutdown (SIGINT: clients disconnected, a
    /// shutdown checkpoint written), then after `timeout` an immediate
    /// shutdown (SIGQUIT), then SIGKILL to the postmaster and every process
    /// working in its data directory as the last resort.
    pub async fn stop(mut self, timeout: Duration) -> StopOutcome {
        if self.has_exited() {
            return StopOutcome::AlreadyExited;
        }
        let steps = [
            (Signal::SIGINT, timeout, StopOutcome::Fast),
            (
                Signal::SIGQUIT,
                Duration::from_secs(5),
                StopOutcome::Immediate,
            ),
        ];
        for (signal, wait, outcome) in steps {
            if kill(self.pid, signal).is_err() {
                return StopOutcome::AlreadyExited;
            }
            if tokio::time::timeout(wait, self.child.wait()).await.is_ok() {
                tracing::info!(pid = self.pid.as_raw(), ?outcome, "postgres stopped");
                return outcome;
            }
            tracing::warn!(
                pid = self.pid.as_raw(),
                ?signal,
                "postgres did not stop in time"
            );
        }
        // Its children are sessions of their own: SIGKILL to the
        // postmaster alone would leave them serving.
        let killed = crate::fence::processes::sweep(
            &self.pgdata,
            Some(self.pid.as_raw()),
            &std::collections::BTreeSet::new(),
        );
        tracing::warn!(processes = ?killed, "postgres killed with every process it started");
        // Bounded: a process in uninterruptible sleep dies only when its
        // I/O ends.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        StopOutcome::Killed
    }
}

/// Resolves when the supervised postmaster exits; never when there is none.
pub async fn exited(
    postmaster: &mut Option<Postmaster>,
) -> Result<std::process::ExitStatus, SupervisorError> {
    match postmaster {
        Some(postmaster) => postmaster.exited().await,
        None => std::future::pending().await,
    }
}

/// A liveness check that sends no signal: true when `pid` exists.
pub fn process_alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None::<Signal>).is_ok()
}

/// One of PostgreSQL's log lines, split into its prefix fields.
#[derive(Debug, PartialEq, Eq)]
pub struct LogLine<'a> {
    pub time: Option<&'a str>,
    pub pid: Option<&'a str>,
    pub level: Option<&'a str>,
    pub message: &'a str,
}

/// Parses a line written with `log_line_prefix = '%m [%p] '`
/// (`2026-01-01 10:00:00.123 UTC [42] LOG:  message`). Lines that do not
/// match (continuations, output of other programs) become the message.
pub fn parse_log_line(line: &str) -> LogLine<'_> {
    let plain = LogLine {
        time: None,
        pid: None,
        level: None,
        message: line,
    };
    let Some(open) = line.find(" [") else {
        return plain;
    };
    let Some(close) = line[open..].find("] ").map(|i| open + i) else {
        return plain;
    };
    if !line.starts_with(|c: char| c.is_ascii_digit()) {
        return plain;
    }
    let pid = &line[open + 2..close];
    if pid.is_empty() || !pid.chars().all(|c| c.is_ascii_digit()) {
        return plain;
    }
    let rest = &line[close + 2..];
    let (level, message) = match rest.split_once(":  ") {
        Some((level, message))
            if !level.is_empty()
                && level
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) =>
        {
            (Some(level), message)
        }
        _ => (None, rest),
    };
    LogLine {
        time: Some(&line[..open]),
        pid: Some(pid),
        level,
        message,
    }
}

/// Turns PostgreSQL's output into log events; an error pgBackRest printed
/// there (its `archive_command` failing) is also kept in `state`.
async fn forward_log(
    stream: impl AsyncRead + Unpin,
    state: Option<SharedState>,
    recovery: Arc<Mutex<RecoveryLog>>,
) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(state) = &state
            && let Some(error) = tusk_postgres::pgbackrest::stderr_error(&line)
        {
            state.lock().archive_push_error = Some(error);
        }
        let parsed = parse_log_line(&line);
        recovery
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(parsed.message);
        let time = parsed.time.unwrap_or_default();
        let pid = parsed.pid.unwrap_or_default();
        let level = parsed.level.unwrap_or_default();
        let message = parsed.message;
        match level {
            "PANIC" | "FATAL" | "ERROR" => {
                tracing::error!(target: "postgres", pg_time = time, pg_pid = pid, pg_level = level, "{message}")
            }
            "WARNING" => {
                tracing::warn!(target: "postgres", pg_time = time, pg_pid = pid, pg_level = level, "{message}")
            }
            l if l.starts_with("DEBUG") => {
                tracing::debug!(target: "postgres", pg_time = time, pg_pid = pid, pg_level = level, "{message}")
            }
            _ => {
                tracing::info!(target: "postgres", pg_time = time, pg_pid = pid, pg_level = level, "{message}")
            }
        }
    }
}

/// Doubling delays between restarts of a crashed PostgreSQL, capped, and
/// reset once it has run for a while.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            next: initial,
        }
    }

    /// The delay before the next restart.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_split_into_fields() {
        let cases = [
            (
                "2026-01-01 10:00:00.123 UTC [42] LOG:  database system is ready to accept connections",
                LogLine {
                    time: Some("2026-01-01 10:00:00.123 UTC"),
                    pid: Some("42"),
                    level: Some("LOG"),
                    message: "database system is ready to accept connections",
                },
            ),
            (
                "2026-01-01 10:00:00.123 UTC [7] DEBUG1:  x: y",
                LogLine {
                    time: Some("2026-01-01 10:00:00.123 UTC"),
                    pid: Some("7"),
                    level: Some("DEBUG1"),
                    message: "x: y",
                },
            ),
            (
                "\tcontinuation of a statement [1] here",
                LogLine {
                    time: None,
                    pid: None,
                    level: None,
                    message: "\tcontinuation of a statement [1] here",
                },
            ),
            (
                "no prefix at all",
                LogLine {
                    time: None,
                    pid: None,
                    level: None,
                    message: "no prefix at all",
                },
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(parse_log_line(line), expected, "{line}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let delays: Vec<u64> = (0..5).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_secs(1));
    }
}
