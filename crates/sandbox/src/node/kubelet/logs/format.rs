//! One line of a CRI log file: written and parsed.

use jiff::Timestamp;

/// Longest content of one line; longer output is split into partial lines,
/// as container runtimes do.
pub const MAX_LINE: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// One parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub time: Timestamp,
    pub stream: Stream,
    /// Whether the content ends a line (`F`); a partial one (`P`) is
    /// continued by the next entry of the same stream.
    pub full: bool,
    /// The content without its line ending.
    pub content: Vec<u8>,
}

impl Entry {
    /// The line as written to the file, newline included. Times carry all
    /// nine fractional digits, so lines sort as text.
    pub fn encode(&self) -> Vec<u8> {
        let mut line = format!(
            "{:.9} {} {} ",
            self.time,
            self.stream.name(),
            if self.full { "F" } else { "P" }
        )
        .into_bytes();
        line.extend_from_slice(&self.content);
        line.push(b'\n');
        line
    }

    /// Parses one line (without its newline); `None` for a line in no
    /// known shape.
    pub fn parse(line: &[u8]) -> Option<Self> {
        let mut fields = line.splitn(4, |b| *b == b' ');
        let time = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
        let stream = match fields.next()? {
            b"stdout" => Stream::Stdout,
            b"stderr" => Stream::Stderr,
            _ => return None,
        };
        let full = match fields.next()? {
            b"F" => true,
            b"P" => false,
            _ => return None,
        };
        let content = fields.next().unwrap_or_default().to_vec();
        Some(Self {
            time,
            stream,
            full,
            content,
        })
    }

    /// What a reader of the log sees: the content, with its newline when
    /// full, and `time ` before it when timestamps are asked for
    /// (RFC 3339 with nanoseconds, trailing zeros dropped, as Go's
    /// RFC3339Nano writes it).
    pub fn render(&self, timestamps: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.content.len() + 40);
        if timestamps {
            out.extend_from_slice(self.time.to_string().as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&self.content);
        if self.full {
            out.push(b'\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_survives_writing_and_parsing() {
        let entry = Entry {
            time: "2026-12-03T16:05:14.120000000Z".parse().expect("time"),
            stream: Stream::Stderr,
            full: true,
            content: b"oops: a b  c".to_vec(),
        };
        let line = entry.encode();
        assert_eq!(
            line,
            b"2026-12-03T16:05:14.120000000Z stderr F oops: a b  c\n"
        );
        assert_eq!(Entry::parse(&line[..line.len() - 1]), Some(entry.clone()));
        assert_eq!(entry.render(false), b"oops: a b  c\n");
        assert_eq!(
            entry.render(true),
            b"2026-12-03T16:05:14.12Z oops: a b  c\n".to_vec()
        );
    }

    #[test]
    fn partial_and_empty_lines_parse_and_garbage_does_not() {
        let partial = Entry::parse(b"2026-12-03T16:05:14Z stdout P abc").expect("parses");
        assert!(!partial.full);
        assert_eq!(partial.render(false), b"abc");
        let empty = Entry::parse(b"2026-12-03T16:05:14Z stdout F ").expect("parses");
        assert_eq!(empty.render(false), b"\n");
        assert_eq!(Entry::parse(b"hello world"), None);
        assert_eq!(Entry::parse(b"2026-12-03T16:05:14Z stdin F x"), None);
    }
}
