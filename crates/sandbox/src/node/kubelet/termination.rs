//! Termination messages: what a container says about its end, shown in
//! `state.terminated.message` (and `lastState.terminated.message` after a
//! restart).
//!
//! What this follows, from Kubernetes' task "Determine the Reason for Pod
//! Failure" and the kubelet's runtime manager (kuberuntime): a container's
//! `terminationMessagePath` (`/dev/termination-log` unless set; admission
//! defaults it) is a file the kubelet creates empty for every start of
//! the container, with mode 0666 so any user may write it, and mounts at
//! that path. When the container ends, the kubelet reads at most 4096
//! bytes of it, the last ones (`MaxContainerTerminationMessageLength`, read
//! from the end of the file), as the message. With
//! `terminationMessagePolicy: FallbackToLogsOnError`, a container that
//! exited with a non-zero code and left the file empty (or missing) gets
//! the end of its log instead: its last 80 lines
//! (`MaxContainerTerminationMessageLogLines`), at most their last 2048
//! bytes (`MaxContainerTerminationMessageLogLength`). The 12 KiB the
//! kubelet allows a whole pod is not enforced here.
//!
//! The sandbox keeps one file per container, emptied in place at every
//! start rather than made anew, so the process runtime's translated paths
//! (see `volumes::Mounts::with_file`) and the Docker runtime's bind mount
//! keep pointing at it. It lives in the pod's volumes directory, which
//! stays the kubelet's, not in the pod directory, which the pod's user may
//! own: a user who could put a link in its place would have a kubelet
//! running as root empty, and publish, a file of the user's choosing.
//!
//! One choice of our own: the kubelet appends the file's message to a
//! message of the runtime's (`<runtime's>: <file's>`). The sandbox keeps
//! its own failure text (a program that could not start, a probe that
//! failed) when the file is empty, but a non-empty file replaces it: what
//! the container wrote about its end is what a reader of the message looks
//! for. The log's end is used only when there is neither.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;

use super::exit::Exit;
use super::logs::last_output;

/// The most of the file a message keeps: its last 4096 bytes.
pub const MAX_MESSAGE_BYTES: u64 = 4096;
/// `FallbackToLogsOnError` takes the log's last 80 lines...
pub const LOG_TAIL_LINES: u64 = 80;
/// ...and of them at most the last 2048 bytes.
pub const LOG_TAIL_BYTES: usize = 2048;

/// The directory of a pod's termination message files, in its volumes
/// directory: a volume's name cannot start with a dot, so none collides.
const FILES_DIR: &str = "..termination";

/// A container's termination message: its file and its policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TerminationMessage {
    /// The file, when the container has a `terminationMessagePath`.
    pub file: Option<MessageFile>,
    /// `terminationMessagePolicy: FallbackToLogsOnError`.
    pub fallback_to_logs: bool,
}

/// Where a container writes its termination message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageFile {
    /// Where the container sees the file: its `terminationMessagePath`.
    pub path: String,
    /// The file on the host.
    pub host: PathBuf,
}

impl TerminationMessage {
    /// The termination message of `container`, whose pod's volumes are in
    /// `volumes_dir`.
    pub fn for_container(container: &Container, volumes_dir: &Path) -> Self {
        let path = container.termination_message_path.as_deref();
        let file = path.filter(|p| !p.is_empty()).map(|path| MessageFile {
            path: path.to_owned(),
            host: volumes_dir.join(FILES_DIR).join(&container.name),
        });
        let policy = container.termination_message_policy.as_deref();
        Self {
            file,
            fallback_to_logs: policy == Some("FallbackToLogsOnError"),
        }
    }

    /// Makes the file empty for a start of the container (creating it), as
    /// the kubelet gives every start a fresh one, writable by any user.
    pub fn reset(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        if let Some(dir) = file.host.parent() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, Permissions::from_mode(0o755))?;
        }
        let opened = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&file.host)?;
        opened.set_permissions(Permissions::from_mode(0o666))
    }

    /// The message of a run that ended with `exit`: what the container
    /// wrote; else the sandbox's own `failure` text; else, with
    /// `FallbackToLogsOnError` and a non-zero exit, the end of the run's
    /// `log`.
    pub fn message(&self, exit: &Exit, failure: Option<String>, log: &Path) -> Option<String> {
        self.written().or(failure).or_else(|| {
            if self.fallback_to_logs && !exit.success() {
                from_log(log)
            } else {
                None
            }
        })
    }

    /// What the container wrote to the file; `None` when it is empty or
    /// missing. As the kubelet, a file that cannot be read says so.
    fn written(&self) -> Option<String> {
        let file = self.file.as_ref()?;
        match read_end(&file.host, MAX_MESSAGE_BYTES) {
            Ok(bytes) if bytes.is_empty() => None,
            Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => Some(format!(
                "Error on reading termination log {}: {error}",
                file.host.display()
            )),
        }
    }
}

/// The last `max` bytes of the file at `path`.
fn read_end(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    let start = file.metadata()?.len().saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The end of a run's log as a message; `None` when the run printed
/// nothing.
fn from_log(log: &Path) -> Option<String> {
    match last_output(log, LOG_TAIL_LINES, LOG_TAIL_BYTES) {
        Ok(tail) if tail.is_empty() => None,
        Ok(tail) => Some(String::from_utf8_lossy(&tail).into_owned()),
        Err(error) => Some(format!(
            "Error on reading termination message from logs: {error}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(policy: &str) -> Container {
        serde_json::from_value(json!({
            "name": "main",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": policy
        }))
        .expect("container")
    }

    fn exit(code: i32) -> Exit {
        Exit {
            code,
            signal: None,
            oom_killed: false,
        }
    }

    /// A log of one line, `text`.
    fn log_of(dir: &Path, text: &str) -> PathBuf {
        let log = dir.join("0.log");
        std::fs::write(&log, format!("2026-12-03T16:05:14Z stderr F {text}\n")).expect("log");
        log
    }

    #[test]
    fn every_start_gets_an_empty_file_any_user_may_write() {
        let dir = tempfile::tempdir().expect("temp dir");
        let message = TerminationMessage::for_container(&container("File"), dir.path());
        let file = message.file.clone().expect("a file");
        assert_eq!(file.path, "/dev/termination-log");
        message.reset().expect("reset");
        std::fs::write(&file.host, "from the first run").expect("write");
        let inode =
            |path: &Path| std::os::unix::fs::MetadataExt::ino(&path.metadata().expect("meta"));
        let first = inode(&file.host);
        message.reset().expect("reset again");
        assert_eq!(std::fs::read(&file.host).expect("read"), b"");
        assert_eq!(inode(&file.host), first, "emptied in place");
        let mode = file.host.metadata().expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o666);
    }

    #[test]
    fn the_message_is_the_last_4096_bytes_of_the_file_and_wins_over_a_failure() {
        let dir = tempfile::tempdir().expect("temp dir");
        let message = TerminationMessage::for_container(&container("File"), dir.path());
        message.reset().expect("reset");
        let host = &message.file.as_ref().expect("file").host;
        let log = log_of(dir.path(), "unused");
        std::fs::write(host, "done-42").expect("write");
        let failure = Some("Liveness probe failed".to_owned());
        let shown = message.message(&exit(3), failure.clone(), &log);
        assert_eq!(shown.as_deref(), Some("done-42"));
        let long = format!("{}{}", "a".repeat(1000), "b".repeat(4096));
        std::fs::write(host, long).expect("write");
        assert_eq!(
            message.message(&exit(0), None, &log),
            Some("b".repeat(4096))
        );
        message.reset().expect("reset");
        assert_eq!(message.message(&exit(1), failure.clone(), &log), failure);
        assert_eq!(message.message(&exit(1), None, &log), None, "File: no log");
    }

    #[test]
    fn fallback_to_logs_on_error_takes_the_log_only_after_a_failing_exit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let policy = container("FallbackToLogsOnError");
        let message = TerminationMessage::for_container(&policy, dir.path());
        let log = log_of(dir.path(), "fatal: no config");
        // A missing file counts as empty.
        assert_eq!(
            message.message(&exit(2), None, &log).as_deref(),
            Some("fatal: no config\n")
        );
        message.reset().expect("reset");
        assert_eq!(message.message(&exit(0), None, &log), None);
        let host = &message.file.as_ref().expect("file").host;
        std::fs::write(host, "written").expect("write");
        assert_eq!(
            message.message(&exit(2), None, &log).as_deref(),
            Some("written")
        );
    }

    #[test]
    fn a_container_without_a_path_has_no_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bare: Container = serde_json::from_value(json!({"name": "main"})).expect("container");
        let message = TerminationMessage::for_container(&bare, dir.path());
        assert_eq!(message, TerminationMessage::default());
        message.reset().expect("nothing to reset");
        assert_eq!(
            message.message(&exit(1), None, &dir.path().join("0.log")),
            None
        );
    }
}
