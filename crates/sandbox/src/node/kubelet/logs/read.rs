//! What `pods/log` asks for (kube's `PodLogOptions` as query parameters)
//! and the selection of log entries it answers with.

use std::collections::HashMap;

use jiff::Timestamp;

use super::format::Entry;

/// The query of a `pods/log` request, checked the way kube-apiserver
/// validates `PodLogOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<u64>,
    pub since: Option<Since>,
    pub limit_bytes: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    Seconds(u64),
    Time(Timestamp),
}

fn flag(query: &HashMap<String, String>, name: &str) -> Result<bool, String> {
    match query.get(name).map(String::as_str) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(format!(
            "{name}: Invalid value: \"{other}\": must be true or false"
        )),
    }
}

fn number(query: &HashMap<String, String>, name: &str, least: u64) -> Result<Option<u64>, String> {
    let Some(text) = query.get(name).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let rule = if least == 0 {
        "must be greater than or equal to 0"
    } else {
        "must be greater than 0"
    };
    match text.parse::<i64>() {
        Ok(value) if value >= least as i64 => Ok(Some(value as u64)),
        Ok(_) => Err(format!("{name}: Invalid value: {text}: {rule}")),
        Err(_) => Err(format!(
            "{name}: Invalid value: \"{text}\": must be an integer"
        )),
    }
}

impl LogOptions {
    pub fn from_query(query: &HashMap<String, String>) -> Result<Self, String> {
        let seconds = number(query, "sinceSeconds", 1)?;
        let time = match query.get("sinceTime").filter(|t| !t.is_empty()) {
            None => None,
            Some(text) => Some(text.parse::<Timestamp>().map_err(|_| {
                format!("sinceTime: Invalid value: \"{text}\": must be an RFC 3339 time")
            })?),
        };
        let since = match (seconds, time) {
            (Some(_), Some(_)) => {
                return Err("at most one of `sinceTime` or `sinceSeconds` may be specified".into());
            }
            (Some(s), None) => Some(Since::Seconds(s)),
            (None, Some(t)) => Some(Since::Time(t)),
            (None, None) => None,
        };
        Ok(Self {
            container: query.get("container").filter(|c| !c.is_empty()).cloned(),
            follow: flag(query, "follow")?,
            previous: flag(query, "previous")?,
            timestamps: flag(query, "timestamps")?,
            tail_lines: number(query, "tailLines", 0)?,
            since,
            limit_bytes: number(query, "limitBytes", 1)?,
        })
    }

    /// The earliest time an entry may have to be shown.
    fn since_time(&self, now: Timestamp) -> Option<Timestamp> {
        match self.since? {
            Since::Time(time) => Some(time),
            Since::Seconds(seconds) => now
                .checked_sub(jiff::SignedDuration::from_secs(seconds as i64))
                .ok(),
        }
    }
}

/// Renders entries for one request, keeping to its time and byte limits.
#[derive(Debug)]
pub struct Renderer {
    timestamps: bool,
    since: Option<Timestamp>,
    budget: Option<u64>,
}

impl Renderer {
    pub fn new(options: &LogOptions) -> Self {
        Self {
            timestamps: options.timestamps,
            since: options.since_time(Timestamp::now()),
            budget: options.limit_bytes,
        }
    }

    /// Whether the byte limit is used up (a follow ends then).
    pub fn exhausted(&self) -> bool {
        self.budget == Some(0)
    }

    /// Appends what `entry` shows to `out`.
    pub fn render(&mut self, entry: &Entry, out: &mut Vec<u8>) {
        if self.since.is_some_and(|since| entry.time < since) || self.exhausted() {
            return;
        }
        let mut shown = entry.render(self.timestamps);
        if let Some(budget) = &mut self.budget {
            shown.truncate(usize::try_from(*budget).unwrap_or(usize::MAX));
            *budget -= shown.len() as u64;
        }
        out.extend_from_slice(&shown);
    }
}

/// The entries of complete lines in `text` (a trailing line without its
/// newline is left for the next read), and how many bytes they took.
pub fn parse_entries(text: &[u8]) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut used = 0;
    while let Some(end) = text[used..].iter().position(|b| *b == b'\n') {
        if let Some(entry) = Entry::parse(&text[used..used + end]) {
            entries.push(entry);
        }
        used += end + 1;
    }
    (entries, used)
}

/// The entries of the last `lines` lines (a line being its partial entries
/// and the full one ending it).
pub fn tail(entries: &[Entry], lines: Option<u64>) -> &[Entry] {
    let Some(lines) = lines else { return entries };
    // A line starts at the first entry and after every full one.
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            entries
                .iter()
                .enumerate()
                .filter(|(index, entry)| entry.full && index + 1 < entries.len())
                .map(|(index, _)| index + 1),
        )
        .filter(|start| *start < entries.len())
        .collect();
    let lines = usize::try_from(lines).unwrap_or(usize::MAX);
    match starts.len().checked_sub(lines) {
        Some(first) => starts
            .get(first)
            .map_or(&entries[entries.len()..], |s| &entries[*s..]),
        None => entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn entry(second: i64, text: &str, full: bool) -> Entry {
        Entry {
            time: Timestamp::from_second(1_700_000_000 + second).expect("time"),
            stream: super::super::Stream::Stdout,
            full,
            content: text.as_bytes().to_vec(),
        }
    }

    fn shown(entries: &[Entry], options: &LogOptions) -> String {
        let mut renderer = Renderer::new(options);
        let mut out = Vec::new();
        for entry in tail(entries, options.tail_lines) {
            renderer.render(entry, &mut out);
        }
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn options_are_read_and_checked_like_pod_log_options() {
        let options = LogOptions::from_query(&query(&[
            ("container", "main"),
            ("follow", "true"),
            ("tailLines", "3"),
            ("sinceSeconds", "10"),
            ("insecureSkipTLSVerifyBackend", "true"),
        ]))
        .expect("valid");
        assert_eq!(options.container.as_deref(), Some("main"));
        assert!(options.follow && !options.previous);
        assert_eq!(options.tail_lines, Some(3));
        assert_eq!(options.since, Some(Since::Seconds(10)));
        let error =
            |pairs: &[(&str, &str)]| LogOptions::from_query(&query(pairs)).expect_err("invalid");
        assert_eq!(
            error(&[("tailLines", "-1")]),
            "tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            error(&[("limitBytes", "0")]),
            "limitBytes: Invalid value: 0: must be greater than 0"
        );
        assert!(
            error(&[("sinceSeconds", "5"), ("sinceTime", "2026-01-01T00:00:00Z")])
                .contains("at most one of")
        );
        assert!(error(&[("sinceTime", "yesterday")]).starts_with("sinceTime:"));
    }

    #[test]
    fn tail_counts_whole_lines_including_their_parts() {
        let entries = vec![
            entry(0, "a", true),
            entry(1, "b1", false),
            entry(2, "b2", true),
            entry(3, "c", true),
        ];
        let options = |tail| LogOptions {
            tail_lines: tail,
            ..LogOptions::default()
        };
        assert_eq!(shown(&entries, &options(Some(2))), "b1b2\nc\n");
        assert_eq!(shown(&entries, &options(Some(1))), "c\n");
        assert_eq!(shown(&entries, &options(Some(0))), "");
        assert_eq!(shown(&entries, &options(Some(9))), "a\nb1b2\nc\n");
        assert_eq!(shown(&entries, &options(None)), "a\nb1b2\nc\n");
    }

    #[test]
    fn since_time_limit_bytes_and_timestamps_shape_the_output() {
        let entries = vec![
            entry(0, "old", true),
            entry(5, "new", true),
            entry(6, "newer", true),
        ];
        let since = LogOptions {
            since: Some(Since::Time(
                Timestamp::from_second(1_700_000_003).expect("t"),
            )),
            timestamps: true,
            ..LogOptions::default()
        };
        assert_eq!(
            shown(&entries, &since),
            "2023-11-14T22:13:25Z new\n2023-11-14T22:13:26Z newer\n"
        );
        let limited = LogOptions {
            limit_bytes: Some(6),
            ..LogOptions::default()
        };
        assert_eq!(shown(&entries, &limited), "old\nne");
    }

    #[test]
    fn only_complete_lines_are_parsed() {
        let (entries, used) =
            parse_entries(b"2026-12-03T16:05:14Z stdout F a\n2026-12-03T16:05:15Z stdout F b");
        assert_eq!(entries.len(), 1);
        assert_eq!(used, 32);
    }
}
