//! Copies a process's output into its CRI log file, one entry per line.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

use super::format::{Entry, MAX_LINE, Stream};

/// The log file both streams of one process write to; each entry is one
/// write, so stdout and stderr lines interleave but never mix.
#[derive(Clone, Debug)]
pub struct LogSink(Arc<Mutex<std::fs::File>>);

impl LogSink {
    pub fn new(file: std::fs::File) -> Self {
        Self(Arc::new(Mutex::new(file)))
    }

    fn write(&self, stream: Stream, full: bool, content: &[u8]) {
        let entry = Entry {
            time: jiff::Timestamp::now(),
            stream,
            full,
            content: content.to_vec(),
        };
        let mut file = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A full disk loses log lines, never the container.
        let _ = file.write_all(&entry.encode());
    }
}

/// Reads `output` to its end, writing every line as it completes, lines
/// longer than [`MAX_LINE`] in parts, and an unterminated end as a part.
pub async fn copy_output(mut output: impl AsyncRead + Unpin, stream: Stream, sink: LogSink) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 8192];
    loop {
        let read = match output.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        pending.extend_from_slice(&chunk[..read]);
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
            let line = &pending[start..start + end];
            for (index, part) in line.chunks(MAX_LINE).enumerate() {
                let last = (index + 1) * MAX_LINE >= line.len();
                sink.write(stream, last, part);
            }
            if line.is_empty() {
                sink.write(stream, true, b"");
            }
            start += end + 1;
        }
        pending.drain(..start);
        while pending.len() >= MAX_LINE {
            sink.write(stream, false, &pending[..MAX_LINE]);
            pending.drain(..MAX_LINE);
        }
    }
    if !pending.is_empty() {
        sink.write(stream, false, &pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn written(input: &[u8]) -> Vec<Entry> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("0.log");
        let file = std::fs::File::create(&path).expect("log file");
        copy_output(input, Stream::Stdout, LogSink::new(file)).await;
        let text = std::fs::read(&path).expect("log");
        text.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| Entry::parse(l).expect("a CRI line"))
            .collect()
    }

    #[tokio::test]
    async fn lines_become_full_entries_and_an_unterminated_end_a_partial_one() {
        let entries = written(b"one\n\ntwo\nthree").await;
        let shown: Vec<(bool, &[u8])> = entries
            .iter()
            .map(|e| (e.full, e.content.as_slice()))
            .collect();
        assert_eq!(
            shown,
            vec![
                (true, &b"one"[..]),
                (true, &b""[..]),
                (true, &b"two"[..]),
                (false, &b"three"[..])
            ]
        );
    }

    #[tokio::test]
    async fn a_long_line_is_split_into_parts() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.push(b'\n');
        let entries = written(&input).await;
        assert_eq!(entries.len(), 2);
        assert!(!entries[0].full && entries[1].full);
        assert_eq!(entries[0].content.len(), MAX_LINE);
        assert_eq!(entries[1].content.len(), 10);
    }
}
