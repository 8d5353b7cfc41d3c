//! PostgreSQL never runs as root: when the manager is root (as in some
//! containers and in tests), every PostgreSQL program is started as the
//! unprivileged PostgreSQL user and the directories it writes are given to
//! that user.

use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Uid, User, chown};

#[derive(Debug, thiserror::Error)]
pub enum ProcessUserError {
    #[error("the manager runs as root but operating-system user `{0}` does not exist")]
    UnknownUser(String),
    #[error("cannot look up operating-system users: {0}")]
    Lookup(nix::Error),
    #[error("cannot give {path} to the PostgreSQL user: {source}")]
    Chown { path: PathBuf, source: nix::Error },
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The operating-system user PostgreSQL programs run as.
#[derive(Clone, Debug)]
pub struct ProcessUser {
    pub name: String,
    pub uid: Uid,
    pub gid: Gid,
    home: PathBuf,
    /// True when the manager is root and must switch to `uid`/`gid`.
    switch: bool,
    /// Name of the user the manager itself runs as.
    pub manager_name: String,
}

impl ProcessUser {
    /// `postgres_user` when the manager is root, the manager's own user
    /// otherwise.
    pub fn detect(postgres_user: &str) -> Result<Self, ProcessUserError> {
        let me = Uid::effective();
        let manager_name = User::from_uid(me)
            .map_err(ProcessUserError::Lookup)?
            .map(|u| u.name)
            .unwrap_or_else(|| me.to_string());
        if me.is_root() {
            let user = User::from_name(postgres_user)
                .map_err(ProcessUserError::Lookup)?
                .ok_or_else(|| ProcessUserError::UnknownUser(postgres_user.to_owned()))?;
            Ok(ProcessUser {
                name: user.name,
                uid: user.uid,
                gid: user.gid,
                home: user.dir,
                switch: true,
                manager_name,
            })
        } else {
            Ok(ProcessUser {
                name: manager_name.clone(),
                uid: me,
                gid: nix::unistd::Gid::effective(),
                home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
                switch: false,
                manager_name,
            })
        }
    }

    /// A command for a PostgreSQL program, run as this user, with a clean
    /// environment apart from `HOME`, `PATH` and locale.
    pub fn command(&self, program: &Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .env("LC_ALL", "C.UTF-8")
            .current_dir("/")
            .kill_on_drop(true);
        if self.switch {
            command.uid(self.uid.as_raw()).gid(self.gid.as_raw());
        }
        command
    }

    /// Gives `path` to this user (when the manager is root).
    pub fn give(&self, path: &Path) -> Result<(), ProcessUserError> {
        if self.switch {
            chown(path, Some(self.uid), Some(self.gid)).map_err(|source| {
                ProcessUserError::Chown {
                    path: path.to_owned(),
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// Creates `path` (mode 0700) if needed and gives it to this user.
    pub fn private_dir(&self, path: &Path) -> Result<(), ProcessUserError> {
        use std::os::unix::fs::DirBuilderExt;
        if !path.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|source| ProcessUserError::Create {
                    path: path.to_owned(),
                    source,
                })?;
        }
        self.give(path)
    }

    /// Writes each file whose content differs ([`Self::private_file`]);
    /// true when any changed.
    pub fn private_files<'a>(
        &self,
        files: impl IntoIterator<Item = (PathBuf, &'a str)>,
    ) -> Result<bool, ProcessUserError> {
        let mut changed = false;
        for (path, content) in files {
            if std::fs::read_to_string(&path).ok().as_deref() == Some(content) {
                continue;
            }
            self.private_file(&path, content)?;
            changed = true;
        }
        Ok(changed)
    }

    /// Writes a file readable only by this user. The content is written
    /// beside it and renamed over it, so a reader (libpq reading the
    /// password file or a key while it is renewed, PostgreSQL its
    /// configuration) sees the old file or the new one, never half of one.
    pub fn private_file(&self, path: &Path, content: &str) -> Result<(), ProcessUserError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt;
        let create = |source| ProcessUserError::Create {
            path: path.to_owned(),
            source,
        };
        let mut staged = path.as_os_str().to_owned();
        staged.push(".tusk-new");
        let staged = std::path::PathBuf::from(staged);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&staged)
            .map_err(create)?;
        file.write_all(content.as_bytes()).map_err(create)?;
        drop(file);
        // A stale staged file keeps the mode it was made with.
        std::fs::set_permissions(&staged, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .map_err(create)?;
        self.give(&staged)?;
        std::fs::rename(&staged, path).map_err(create)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// A reader that opened the file before it was replaced reads the old
    /// content whole; the new file is private.
    #[test]
    fn a_replaced_file_is_never_seen_half_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("pgpass");
        let me = ProcessUser::detect(&current_user()).expect("the current user");
        me.private_file(&path, "old content").expect("first write");
        let mut reader = std::fs::File::open(&path).expect("open");
        std::fs::write(path.with_extension("tusk-new"), "stale").expect("stale staged file");
        me.private_file(&path, "new").expect("second write");
        let mut seen = String::new();
        reader.read_to_string(&mut seen).expect("read");
        assert_eq!(seen, "old content");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!path.with_extension("tusk-new").exists());
    }

    fn current_user() -> String {
        nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.name)
            .expect("a named user")
    }
}
