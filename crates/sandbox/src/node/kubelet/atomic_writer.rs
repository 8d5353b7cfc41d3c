//! Writing a volume's files the way the kubelet's atomic writer does, so
//! that a Secret or ConfigMap volume can be updated while containers read
//! it and no reader ever sees half of an update:
//!
//! ```text
//! <dir>/..2026_12_04_15_00_00.123456789/<files>   the payload
//! <dir>/..data -> ..2026_12_04_15_00_00.123456789
//! <dir>/<top-level name> -> ..data/<top-level name>
//! ```
//!
//! An update writes a new timestamped directory, points a temporary link
//! at it and renames that link over `..data` (one atomic step), then
//! adds links for new names, removes the links of names gone, and removes
//! the old directory. A reader that opened `password` before the rename
//! reads the old content in full; one that opens it after reads the new.
//! Everything stays inside `<dir>`, with relative links, so a bind mount
//! of `<dir>` (the Docker runtime) sees every update.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::files::FileOwner;

/// A file of a volume: relative path, content, mode.
pub type File = (String, Vec<u8>, u32);

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// Why a payload cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("path {0:?} must be relative, inside the volume, and not start with `..`")]
    Path(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.to_owned();
    move |source| WriteError::Io { path, source }
}

/// Writes `files` into `dir` unless it already holds exactly them; true
/// when it wrote.
pub fn write(dir: &Path, files: &[File], owner: Option<FileOwner>) -> Result<bool, WriteError> {
    for (path, _, _) in files {
        let parts: Vec<&str> = path.split('/').collect();
        let bad = Path::new(path).is_absolute()
            || parts.iter().any(|p| *p == ".." || p.is_empty())
            || parts.first().is_some_and(|p| p.starts_with(".."));
        if bad {
            return Err(WriteError::Path(path.clone()));
        }
    }
    let current = std::fs::read_link(dir.join(DATA)).ok();
    if current.is_none() && dir.exists() {
        // Not written by this writer (an earlier layout): start afresh.
        std::fs::remove_dir_all(dir).map_err(io(dir))?;
    }
    if let Some(current) = &current
        && holds_exactly(&dir.join(current), files)
    {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    chown(dir, owner)?;

    let stamp = k8s_openapi::jiff::Timestamp::now().strftime("..%Y_%m_%d_%H_%M_%S.%f");
    let fresh = dir.join(stamp.to_string());
    std::fs::create_dir(&fresh).map_err(io(&fresh))?;
    chown(&fresh, owner)?;
    for (relative, content, mode) in files {
        let path = fresh.join(relative);
        if let Some(parent) = path.parent().filter(|p| *p != fresh) {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
            chown(parent, owner)?;
        }
        std::fs::write(&path, content).map_err(io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
            .map_err(io(&path))?;
        chown(&path, owner)?;
    }

    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    let name = fresh.file_name().map(PathBuf::from).unwrap_or_default();
    std::os::unix::fs::symlink(&name, &tmp).map_err(io(&tmp))?;
    std::fs::rename(&tmp, dir.join(DATA)).map_err(io(dir))?;

    let visible: BTreeSet<&str> = files
        .iter()
        .filter_map(|(path, _, _)| path.split('/').next())
        .collect();
    for name in &visible {
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link).map_err(io(&link))?;
        }
    }
    for entry in std::fs::read_dir(dir).map_err(io(dir))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !visible.contains(name.as_str()) {
            std::fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
        }
    }
    if let Some(old) = current {
        let old = dir.join(old);
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    Ok(true)
}

/// True when `data` holds `files` (content and mode) and nothing else.
fn holds_exactly(data: &Path, files: &[File]) -> bool {
    let same = files.iter().all(|(relative, content, mode)| {
        let path = data.join(relative);
        let meta = std::fs::metadata(&path);
        meta.is_ok_and(|m| m.permissions().mode() & 0o7777 == *mode)
            && std::fs::read(&path).is_ok_and(|c| c == *content)
    });
    same && count_files(data) == files.len()
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() { count_files(&path) } else { 1 }
        })
        .sum()
}

fn chown(path: &Path, owner: Option<FileOwner>) -> Result<(), WriteError> {
    if let Some(owner) = owner {
        std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid)).map_err(io(path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> File {
        (path.to_owned(), content.as_bytes().to_vec(), 0o640)
    }

    #[test]
    fn an_update_swaps_the_whole_payload_at_once_behind_stable_names() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("secret");
        let first = [file("username", "app"), file("password", "one")];
        assert!(write(&dir, &first, None).expect("written"));
        assert_eq!(
            std::fs::read_to_string(dir.join("password")).expect("read"),
            "one"
        );
        assert!(
            dir.join("password")
                .symlink_metadata()
                .expect("link")
                .is_symlink()
        );
        let mode = std::fs::metadata(dir.join("password"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        let before = std::fs::read_link(dir.join(DATA)).expect("..data");

        // The same payload again: nothing is written.
        assert!(!write(&dir, &first, None).expect("unchanged"));
        assert_eq!(std::fs::read_link(dir.join(DATA)).expect("..data"), before);

        // A file held open across an update reads the old content whole.
        let held = std::fs::File::open(dir.join("password")).expect("open");
        let second = [
            file("username", "app"),
            file("password", "two"),
            file("nested/ca.crt", "CA"),
        ];
        assert!(write(&dir, &second, None).expect("updated"));
        assert_eq!(
            std::fs::read_to_string(dir.join("password")).expect("read"),
            "two"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("nested/ca.crt")).expect("read"),
            "CA"
        );
        let mut old = String::new();
        std::io::Read::read_to_string(&mut &held, &mut old).expect("read held");
        assert_eq!(old, "one");
        assert!(!dir.join(&before).exists(), "the old payload is removed");

        // A key that left the source leaves the volume.
        let third = [file("password", "three")];
        assert!(write(&dir, &third, None).expect("updated"));
        assert!(dir.join("username").symlink_metadata().is_err());
        assert!(dir.join("nested").symlink_metadata().is_err());
        let names: BTreeSet<String> = std::fs::read_dir(&dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(".."))
            .collect();
        assert_eq!(names, BTreeSet::from(["password".to_owned()]));
    }

    #[test]
    fn paths_outside_the_volume_or_hidden_behind_dots_are_refused() {
        let root = tempfile::tempdir().expect("temp dir");
        for bad in ["/etc/passwd", "../x", "a/../../x", "..data", "a//b"] {
            let result = write(&root.path().join("v"), &[file(bad, "x")], None);
            assert!(
                matches!(result, Err(WriteError::Path(_))),
                "{bad}: {result:?}"
            );
        }
    }

    #[test]
    fn a_directory_of_an_earlier_layout_is_replaced() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("v");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("stale"), "x").expect("stale");
        write(&dir, &[file("key", "value")], None).expect("written");
        assert!(dir.join("stale").symlink_metadata().is_err());
        assert_eq!(
            std::fs::read_to_string(dir.join("key")).expect("read"),
            "value"
        );
    }
}
