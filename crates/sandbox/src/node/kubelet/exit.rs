//! How a container ended, whichever runtime ran it.

/// How a container ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The exit code, or 128 + the signal number when killed by a signal
    /// (the convention container runtimes report).
    pub code: i32,
    pub signal: Option<i32>,
    /// Ended by the kernel's OOM killer at the container's memory limit
    /// (the Docker runtime only; the process runtime sets no limit).
    pub oom_killed: bool,
}

impl Exit {
    pub(super) fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Self {
                code,
                signal: None,
                oom_killed: false,
            },
            (None, Some(signal)) => Self {
                code: 128 + signal,
                signal: Some(signal),
                oom_killed: false,
            },
            (None, None) => Self {
                code: -1,
                signal: None,
                oom_killed: false,
            },
        }
    }

    pub fn success(&self) -> bool {
        self.code == 0
    }
}
