//! Container logs as the kubelet keeps them: one file per container
//! instance, `<pod dir>/logs/<container>/<restartCount>.log`, each line in
//! the CRI log format `<RFC3339Nano time> <stdout|stderr> <F|P> <content>`
//! (`F` a full line, `P` a part of a longer one or an unterminated end).
//!
//! `writer` turns a process's stdout and stderr pipes into such lines;
//! `read` selects and renders them for `pods/log` (tail, since, limit,
//! timestamps). The file of the previous instance stays after a restart,
//! so `kubectl logs --previous` reads the one numbered one less.
//! [`last_output`] is the end of a run's output, for the termination
//! message of a container with `FallbackToLogsOnError`.

mod format;
pub mod read;
mod writer;

use std::io::{Read, Seek, SeekFrom};
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

/// What the last `lines` lines of the log at `path` showed (without
/// timestamps), cut to their last `max_bytes`, as the kubelet's tail of a
/// log into a ring buffer does. Only the end of the file is read: every
/// entry shows at least one byte and takes under 64 on disk besides its
/// content, so `max_bytes` × 64 bytes, plus one cut line dropped at the
/// start, hold all that can be shown.
pub fn last_output(path: &Path, lines: u64, max_bytes: usize) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let window = (max_bytes as u64 + 1) * 64 + format::MAX_LINE as u64;
    let start = file.metadata()?.len().saturating_sub(window);
    file.seek(SeekFrom::Start(start))?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)?;
    if start > 0 {
        let cut = text
            .iter()
            .position(|b| *b == b'\n')
            .map_or(text.len(), |i| i + 1);
        text.drain(..cut);
    }
    let (entries, _) = read::parse_entries(&text);
    let mut shown: Vec<u8> = read::tail(&entries, Some(lines))
        .iter()
        .flat_map(|entry| entry.render(false))
        .collect();
    shown.drain(..shown.len().saturating_sub(max_bytes));
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_lines(path: &Path, lines: impl IntoIterator<Item = String>) {
        let sink = std::fs::File::create(path).expect("log");
        let mut out = std::io::BufWriter::new(sink);
        for (second, content) in lines.into_iter().enumerate() {
            let entry = format::Entry {
                time: jiff::Timestamp::from_second(1_700_000_000 + second as i64).expect("time"),
                stream: Stream::Stderr,
                full: true,
                content: content.into_bytes(),
            };
            std::io::Write::write_all(&mut out, &entry.encode()).expect("write");
        }
    }

    #[test]
    fn the_last_output_is_the_last_lines_cut_to_their_last_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("0.log");
        write_lines(&log, (0..100).map(|n| format!("line {n}")));
        let shown = String::from_utf8(last_output(&log, 80, 2048).expect("read")).expect("utf-8");
        let expected: String = (20..100).map(|n| format!("line {n}\n")).collect();
        assert_eq!(shown, expected);
        let cut = last_output(&log, 80, 10).expect("read");
        assert_eq!(cut, b"8\nline 99\n");
    }

    #[test]
    fn the_last_output_of_a_long_log_reads_only_its_end() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("0.log");
        // Far more than the window, so reading starts inside a line.
        write_lines(&log, (0..20_000).map(|n| format!("{n:0>30}")));
        let shown = last_output(&log, 80, 2048).expect("read");
        assert_eq!(shown.len(), 2048);
        assert!(shown.ends_with(format!("{:0>30}\n", 19_999).as_bytes()));
        assert_eq!(
            last_output(&dir.path().join("absent.log"), 80, 2048).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );
    }

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
