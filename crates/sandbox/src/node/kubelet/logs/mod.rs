//! Container logs as the kubelet keeps them: one file per container
//! instance, `<pod dir>/logs/<container>/<restartCount>.log`, each line in
//! the CRI log format `<RFC3339Nano time> <stdout|stderr> <F|P> <content>`
//! (`F` a full line, `P` a part of a longer one or an unterminated end).
//!
//! `writer` turns a process's stdout and stderr pipes into such lines;
//! `read` selects and renders them for `pods/log` (tail, since, limit,
//! timestamps). The file of the previous instance stays after a restart,
//! so `kubectl logs --previous` reads the one numbered one less.

mod format;
pub mod read;
mod writer;

use std::path::{Path, PathBuf};

pub use format::Stream;
pub use writer::{LogSink, copy_output};

/// The log file of the container run numbered `run` (its restart count).
pub fn run_log(log_dir: &Path, run: i32) -> PathBuf {
    log_dir.join(format!("{run}.log"))
}

/// Removes the logs of runs before the previous one when run `current`
/// starts: as on a node, a container's current and previous logs are
/// kept, so a crash-looping container does not fill the disk with runs.
pub fn prune(log_dir: &Path, current: i32) {
    let Ok(entries) = std::fs::read_dir(log_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let run = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<i32>().ok());
        if run.is_some_and(|run| run < current - 1) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_a_run_keeps_the_previous_log_and_removes_older_ones() {
        let dir = tempfile::tempdir().expect("temp dir");
        for run in 0..4 {
            std::fs::write(run_log(dir.path(), run), "x").expect("log");
        }
        std::fs::write(dir.path().join("probes.log"), "x").expect("probe log");
        prune(dir.path(), 4);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["3.log", "probes.log"]);
    }
}
