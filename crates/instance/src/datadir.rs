//! The data directory on disk: whether it holds a cluster, which role its
//! files say it has, and writing the rendered configuration into it.

use std::path::{Path, PathBuf};

use crate::postgres::config::{self, ConfigError, ServerConfig};
use crate::postgres::version::{VersionError, parse_pg_version_file};
use crate::process_user::{ProcessUser, ProcessUserError};

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("cannot render the configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("cannot render pgBackRest's configuration: {0}")]
    Archiving(#[from] tusk_postgres::pgbackrest::RepositoryError),
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    User(#[from] ProcessUserError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("unreadable PG_VERSION: {0}")]
    Version(#[from] VersionError),
    #[error(
        "a former copy of this instance's data is kept at {0}; replacing the data again waits until that copy is deleted (docs/runbook.md, \"A diverged copy is kept\")"
    )]
    CopyKept(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataDirError + '_ {
    move |source| DataDirError::Io {
        path: path.to_owned(),
        source,
    }
}

/// True when `pgdata` holds a database cluster (not merely exists).
pub fn is_initialized(pgdata: &Path) -> bool {
    pgdata.join("PG_VERSION").is_file() && pgdata.join("global").is_dir()
}

/// Major version of the cluster in `pgdata`.
pub fn data_major_version(pgdata: &Path) -> Result<u32, DataDirError> {
    let path = pgdata.join("PG_VERSION");
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    Ok(parse_pg_version_file(&text)?)
}

/// True when the data directory starts as a standby.
pub fn is_standby(pgdata: &Path) -> bool {
    pgdata.join("standby.signal").is_file()
}

/// Creates or removes `standby.signal`.
pub fn set_standby_signal(
    pgdata: &Path,
    user: &ProcessUser,
    standby: bool,
) -> Result<(), DataDirError> {
    let path = pgdata.join("standby.signal");
    if standby {
        user.private_file(&path, "")?;
    } else if path.exists() {
        std::fs::remove_file(&path).map_err(io(&path))?;
    }
    Ok(())
}

/// The files the manager renders into a data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedFiles {
    pub postgresql_conf: String,
    pub pg_hba: String,
    pub pg_ident: String,
}

impl RenderedFiles {
    pub fn render(
        server: &ServerConfig,
        superuser: &str,
        replication_user: &str,
        os_users: &[&str],
        remote_superuser: bool,
    ) -> Result<Self, DataDirError> {
        Ok(RenderedFiles {
            postgresql_conf: config::render_postgresql_conf(server)?,
            pg_hba: config::render_pg_hba(
                superuser,
                replication_user,
                server.tls.is_some(),
                remote_superuser,
            ),
            pg_ident: config::render_pg_ident(os_users, superuser),
        })
    }

    /// Writes the files that differ; true when anything changed.
    pub fn write(&self, pgdata: &Path, user: &ProcessUser) -> Result<bool, DataDirError> {
        Ok(user.private_files([
            (
                pgdata.join("postgresql.conf"),
                self.postgresql_conf.as_str(),
            ),
            (pgdata.join("pg_hba.conf"), self.pg_hba.as_str()),
            (pgdata.join("pg_ident.conf"), self.pg_ident.as_str()),
        ])?)
    }
}

/// Removes a directory tree if it exists.
pub fn remove_dir(path: &Path) -> Result<(), DataDirError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(DataDirError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Moves a finished staging directory into place as PGDATA. An empty
/// PGDATA directory (e.g. a fresh volume's subdirectory) is replaced.
pub fn promote_staging(staging: &Path, pgdata: &Path) -> Result<(), DataDirError> {
    if pgdata.is_dir() && !is_initialized(pgdata) {
        let empty = std::fs::read_dir(pgdata)
            .map_err(io(pgdata))?
            .next()
            .is_none();
        if empty {
            std::fs::remove_dir(pgdata).map_err(io(pgdata))?;
        }
    }
    std::fs::rename(staging, pgdata).map_err(io(pgdata))
}

/// Where the data directory replaced by a fresh clone is kept.
pub fn kept_copy(pgdata: &Path) -> PathBuf {
    let name = pgdata
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pgdata".into());
    pgdata.with_file_name(format!("{name}.replaced"))
}

/// Moves a data directory aside before it is replaced by a fresh clone,
/// to `<pgdata>.replaced`, where it stays until a person deletes it: it
/// may hold the only copy of writes the new primary never received.
/// At most one copy is kept, so the volume holds at most twice the data:
/// while one is kept, a further replacement is refused
/// ([`DataDirError::CopyKept`]) rather than deleting the older copy.
pub fn move_aside(pgdata: &Path) -> Result<PathBuf, DataDirError> {
    let aside = kept_copy(pgdata);
    if aside.exists() {
        return Err(DataDirError::CopyKept(aside));
    }
    std::fs::rename(pgdata, &aside).map_err(io(pgdata))?;
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_copy_is_never_replaced_by_a_newer_one() {
        let root = tempfile::tempdir().expect("temporary directory");
        let pgdata = root.path().join("pgdata");
        std::fs::create_dir(&pgdata).expect("pgdata");
        std::fs::write(pgdata.join("first"), "diverged").expect("a file");
        let aside = move_aside(&pgdata).expect("moved aside");
        assert_eq!(aside, root.path().join("pgdata.replaced"));
        std::fs::create_dir(&pgdata).expect("a new pgdata");
        let refused = move_aside(&pgdata).expect_err("a second copy is refused");
        assert!(matches!(refused, DataDirError::CopyKept(_)), "{refused}");
        assert!(aside.join("first").is_file(), "the first copy is intact");
        assert!(pgdata.is_dir(), "the data stays in place");
    }
}
