//! The machine's processes as `/proc` lists them: their ids and command
//! lines. The kubelet's process runtime walks a container's tree with
//! them; the test harness finds a control plane's components by the
//! directory their command lines name.

/// The id of every process running now.
pub(crate) fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// A process's arguments joined by spaces (PostgreSQL's children rewrite
/// theirs, e.g. `postgres: walsender ...`).
pub(crate) fn command_line(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    Some(words.join(" "))
}
