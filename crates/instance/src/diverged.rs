//! A copy of the WAL a rewind discards. A former primary that took
//! writes its successor never received has them in its WAL after the
//! point where the two histories diverged; `pg_rewind` undoes them (it
//! copies the new primary's pages and WAL over them), so before it runs,
//! the WAL segments of the old timeline from the divergence on are copied
//! to `<pgdata>.diverged/<timeline>-<lsn>/`, beside the data on the same
//! volume, where they stay until a person deletes them. `pg_waldump`
//! reads them there (docs/runbook.md, "A former primary's diverged
//! writes").
//!
//! The divergence point is the one `pg_rewind --dry-run` prints; a
//! rewind retried after a copy was made copies nothing again.

use std::path::{Path, PathBuf};

/// Where the WAL discarded by rewinds of `pgdata` is kept.
pub fn kept_wal(pgdata: &Path) -> PathBuf {
    let name = pgdata
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pgdata".into());
    pgdata.with_file_name(format!("{name}.diverged"))
}

/// Whether some rewind of `pgdata` kept discarded WAL: the folder the
/// instance reports, or `None`.
pub fn kept(pgdata: &Path) -> Option<PathBuf> {
    let kept = kept_wal(pgdata);
    let any = std::fs::read_dir(&kept).ok()?.next().is_some();
    any.then_some(kept)
}

/// Where the histories of the rewound data and its new primary part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The first WAL position the new primary does not share.
    pub lsn: u64,
    /// The timeline the rewound data was on at that point.
    pub timeline: u32,
}

/// The divergence `pg_rewind` printed ("servers diverged at WAL location
/// 0/3000148 on timeline 1"); `None` when it found none ("no rewind
/// required").
pub fn divergence(pg_rewind_output: &str) -> Option<Divergence> {
    let rest = pg_rewind_output
        .split("servers diverged at WAL location ")
        .nth(1)?;
    let mut words = rest.split_whitespace();
    let lsn = parse_lsn(words.next()?)?;
    let (on, timeline) = (words.next()?, words.next()?);
    (on == "on" && timeline == "timeline").then_some(())?;
    let timeline = words
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some(Divergence { lsn, timeline })
}

/// An LSN as PostgreSQL prints it (`16/B374D848`).
fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.split_once('/')?;
    let high = u64::from_str_radix(high, 16).ok()?;
    let low = u64::from_str_radix(low, 16).ok()?;
    (low <= u64::from(u32::MAX)).then_some((high << 32) | low)
}

/// The WAL segment size `pg_controldata` printed.
pub fn segment_size(control_data: &str) -> Option<u64> {
    control_data
        .lines()
        .find_map(|line| line.strip_prefix("Bytes per WAL segment:"))
        .and_then(|size| size.trim().parse().ok())
        .filter(|size: &u64| size.is_power_of_two())
}

/// Whether the file name `name` is a WAL segment of `timeline` at or
/// after the one holding `from` (segments of `segment_size` bytes).
fn discarded(name: &str, divergence: Divergence, segment_size: u64) -> bool {
    if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let field = |range: std::ops::Range<usize>| u64::from_str_radix(&name[range], 16).ok();
    let (Some(timeline), Some(log), Some(seg)) = (field(0..8), field(8..16), field(16..24)) else {
        return false;
    };
    let per_log = 0x1_0000_0000 / segment_size;
    timeline == u64::from(divergence.timeline)
        && log * per_log + seg >= divergence.lsn / segment_size
}

/// Copies the WAL segments of `pgdata` that a rewind from `divergence`
/// discards, and the timeline history files, to a folder of their own
/// under [`kept_wal`]; returns it and how many segments it holds. A
/// folder already there (a retried rewind) is kept as it is.
pub fn keep(
    pgdata: &Path,
    divergence: Divergence,
    segment_size: u64,
) -> std::io::Result<(PathBuf, usize)> {
    let folder = kept_wal(pgdata).join(format!(
        "{:08X}-{:X}-{:08X}",
        divergence.timeline,
        divergence.lsn >> 32,
        divergence.lsn & 0xFFFF_FFFF
    ));
    let count = |folder: &Path| -> std::io::Result<usize> {
        Ok(std::fs::read_dir(folder)?
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".history"))
            .count())
    };
    if folder.is_dir() {
        return Ok((folder.clone(), count(&folder)?));
    }
    // Written beside and renamed, so a folder there is a whole copy.
    let partial = folder.with_extension("partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    std::fs::create_dir_all(&partial)?;
    for entry in std::fs::read_dir(pgdata.join("pg_wal"))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if discarded(&name, divergence, segment_size) || name.ends_with(".history") {
            std::fs::copy(entry.path(), partial.join(&name))?;
        }
    }
    std::fs::rename(&partial, &folder)?;
    Ok((folder.clone(), count(&folder)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGMENT: u64 = 16 * 1024 * 1024;

    #[test]
    fn the_divergence_is_read_from_what_pg_rewind_printed() {
        let printed = "pg_rewind: servers diverged at WAL location 0/3000148 on timeline 1\n\
                       pg_rewind: rewinding from last common checkpoint at 0/2000060 on timeline 1\n";
        assert_eq!(
            divergence(printed),
            Some(Divergence {
                lsn: 0x3000148,
                timeline: 1
            })
        );
        assert_eq!(
            divergence("pg_rewind: servers diverged at WAL location 1A/FF000000 on timeline 12."),
            Some(Divergence {
                lsn: 0x1A_FF00_0000,
                timeline: 12
            })
        );
        assert_eq!(divergence("pg_rewind: no rewind required"), None);
        assert_eq!(
            divergence("servers diverged at WAL location nonsense on timeline 1"),
            None
        );
    }

    #[test]
    fn only_segments_of_the_old_timeline_from_the_divergence_on_are_discarded() {
        let at = Divergence {
            lsn: 0x1_0300_0148,
            timeline: 2,
        };
        assert!(discarded("000000020000000100000003", at, SEGMENT));
        assert!(discarded("000000020000000100000004", at, SEGMENT));
        assert!(discarded("000000020000000200000000", at, SEGMENT));
        assert!(
            !discarded("000000020000000100000002", at, SEGMENT),
            "before"
        );
        assert!(
            !discarded("000000030000000100000003", at, SEGMENT),
            "new timeline"
        );
        assert!(!discarded("00000002.history", at, SEGMENT));
        assert!(!discarded("000000020000000100000003.partial", at, SEGMENT));
        assert!(!discarded("archive_status", at, SEGMENT));
    }

    #[test]
    fn the_copy_holds_the_discarded_segments_and_is_made_once() {
        let root = tempfile::tempdir().expect("temporary directory");
        let pgdata = root.path().join("pgdata");
        let wal = pgdata.join("pg_wal");
        std::fs::create_dir_all(wal.join("archive_status")).expect("pg_wal");
        for name in [
            "000000010000000000000002",
            "000000010000000000000003",
            "000000010000000000000004",
            "00000002.history",
        ] {
            std::fs::write(wal.join(name), name).expect("a segment");
        }
        let at = Divergence {
            lsn: 0x3000148,
            timeline: 1,
        };
        let (folder, segments) = keep(&pgdata, at, SEGMENT).expect("kept");
        assert_eq!(
            folder,
            root.path().join("pgdata.diverged/00000001-0-03000148")
        );
        assert_eq!(segments, 2);
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .expect("the copy")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "000000010000000000000003",
                "000000010000000000000004",
                "00000002.history"
            ]
        );
        assert_eq!(kept(&pgdata), Some(root.path().join("pgdata.diverged")));

        // A retried rewind finds the copy and leaves it as it is, even
        // though the data's WAL has changed since.
        std::fs::remove_file(wal.join("000000010000000000000004")).expect("removed");
        let (again, segments) = keep(&pgdata, at, SEGMENT).expect("kept again");
        assert_eq!((again, segments), (folder.clone(), 2));
    }

    #[test]
    fn nothing_is_reported_before_a_copy_is_kept() {
        let root = tempfile::tempdir().expect("temporary directory");
        let pgdata = root.path().join("pgdata");
        std::fs::create_dir_all(&pgdata).expect("pgdata");
        assert_eq!(kept(&pgdata), None);
        std::fs::create_dir_all(kept_wal(&pgdata)).expect("an empty folder");
        assert_eq!(kept(&pgdata), None, "an empty folder holds nothing");
    }

    #[test]
    fn the_segment_size_is_read_from_pg_controldata() {
        let control = "Database block size:                  8192\nBytes per WAL segment:                16777216\n";
        assert_eq!(segment_size(control), Some(SEGMENT));
        assert_eq!(segment_size("Bytes per WAL segment: 1000"), None);
        assert_eq!(segment_size(""), None);
    }
}
