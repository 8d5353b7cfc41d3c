//! What the instance manager is given: its identity and paths (from the
//! environment, filled in by the CLI) and credentials (from mounted secret
//! files).

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A credential file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read credential file {path}: {source}")]
    ReadSecret {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("credential file {0} is empty")]
    EmptySecret(PathBuf),
}

/// Identity, paths and ports of one instance.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Pod (instance) name.
    pub pod_name: String,
    pub namespace: String,
    pub cluster_name: String,
    /// The pod IP: PostgreSQL and the HTTP API listen on it.
    pub pod_ip: IpAddr,
    pub pgdata: PathBuf,
    /// Directory holding `postgres`, `initdb`, `pg_basebackup`, `pg_rewind`.
    pub bin_dir: PathBuf,
    /// Short directory (under /tmp) for PostgreSQL's unix socket and the
    /// replication password file, owned by the PostgreSQL user.
    pub run_dir: PathBuf,
    pub postgres_port: u16,
    pub http_port: u16,
    /// Operating-system user PostgreSQL runs as when the manager is root.
    pub os_user: String,
    /// How long a fast shutdown may take before it becomes immediate.
    pub stop_timeout: Duration,
    /// Serve the HTTP API over HTTPS ([`crate::api_tls`]).
    pub api_tls: bool,
    pub credentials: Credentials,
    /// Where the pod's Secrets are mounted (the backup destination's CA).
    pub secrets_dir: PathBuf,
    /// The backup repository's keys, passed to pgBackRest (and to
    /// PostgreSQL, whose `archive_command` runs it) in the environment.
    pub repository_keys: Option<tusk_api::contract::RepositoryKeys>,
    /// The keys of the repository a new cluster is restored from
    /// (`spec.bootstrap.recovery.source`), when it names a Secret.
    pub source_keys: Option<tusk_api::contract::RepositoryKeys>,
}

impl Settings {
    /// The settings the pod contract's environment describes.
    pub fn from_environment(
        env: tusk_api::contract::InstanceEnvironment,
        credentials: Credentials,
    ) -> Self {
        Settings {
            pod_name: env.pod_name,
            namespace: env.namespace,
            cluster_name: env.cluster_name,
            pod_ip: env.pod_ip,
            pgdata: env.pgdata,
            bin_dir: env.bin_dir,
            run_dir: env.run_dir,
            postgres_port: env.postgres_port,
            http_port: env.http_port,
            os_user: env.os_user,
            stop_timeout: Duration::from_secs(env.stop_timeout_seconds),
            api_tls: env.api_tls,
            credentials,
            secrets_dir: env.secrets_dir,
            repository_keys: env.repository_keys,
            source_keys: env.source_keys,
        }
    }

    /// Where the staging directory of a restartable bootstrap lives: next to
    /// PGDATA, on the same file system, so that the final rename is atomic.
    pub fn staging_dir(&self) -> PathBuf {
        let name = self
            .pgdata
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "pgdata".into());
        self.pgdata.with_file_name(format!("{name}.tusk-staging"))
    }

    /// The libpq password file used for replication, pg_basebackup and
    /// pg_rewind.
    pub fn passfile(&self) -> PathBuf {
        self.run_dir.join("pgpass")
    }

    /// pgBackRest's directory: next to PGDATA on the data volume (its
    /// configuration, the asynchronous archiver's spool, its logs), so it
    /// survives the pod and is never copied into a replica.
    pub fn pgbackrest_dir(&self) -> PathBuf {
        self.pgdata.with_file_name("pgbackrest")
    }

    pub fn binary(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }
}

/// The three database users the instance manager works with.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub superuser: UserSecret,
    pub app_owner: UserSecret,
    pub replication: UserSecret,
}

/// A user name and its password. The password never appears in `Debug`
/// output or logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserSecret {
    pub username: String,
    pub password: Password,
}

/// A password; `Debug` prints it redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(value: impl Into<String>) -> Self {
        Password(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

impl Credentials {
    /// Reads the three mounted credentials Secrets under `secrets_dir`,
    /// one directory per [`tusk_api::contract::Credential`].
    pub fn read(secrets_dir: &Path) -> Result<Self, SettingsError> {
        use tusk_api::contract::Credential;
        let secret = |credential: Credential| {
            UserSecret::from_dir(&secrets_dir.join(credential.mount_name()))
        };
        Ok(Credentials {
            superuser: secret(Credential::Superuser)?,
            app_owner: secret(Credential::App)?,
            replication: secret(Credential::Replication)?,
        })
    }

    /// The credentials whose password differs in `newer`, by mount name;
    /// `Err` naming the first whose user name differs (a user name is
    /// not rotated: the role keeps its name).
    pub fn rotated(&self, newer: &Credentials) -> Result<Vec<&'static str>, &'static str> {
        let pairs = [
            ("superuser", &self.superuser, &newer.superuser),
            ("app", &self.app_owner, &newer.app_owner),
            ("replication", &self.replication, &newer.replication),
        ];
        let mut changed = Vec::new();
        for (name, old, new) in pairs {
            if old.username != new.username {
                return Err(name);
            }
            if old.password != new.password {
                changed.push(name);
            }
        }
        Ok(changed)
    }
}

impl UserSecret {
    /// Reads a mounted `kubernetes.io/basic-auth` Secret: a directory with
    /// files `username` and `password`. A trailing newline is not part of
    /// either.
    pub fn from_dir(dir: &Path) -> Result<Self, SettingsError> {
        Ok(UserSecret {
            username: read_secret(&dir.join("username"))?,
            password: Password(read_secret(&dir.join("password"))?),
        })
    }
}

fn read_secret(path: &Path) -> Result<String, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::ReadSecret {
        path: path.to_owned(),
        source,
    })?;
    let value = text.trim_end_matches(['\n', '\r']).to_owned();
    if value.is_empty() {
        return Err(SettingsError::EmptySecret(path.to_owned()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_read_from_mounted_files_and_never_printed() {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("username"), "app\n").expect("write");
        std::fs::write(dir.path().join("password"), "s3cret-value\n").expect("write");
        let secret = UserSecret::from_dir(dir.path()).expect("reads");
        assert_eq!(secret.username, "app");
        assert_eq!(secret.password.expose(), "s3cret-value");
        assert!(!format!("{secret:?}").contains("s3cret-value"));
    }

    #[test]
    fn a_rotation_is_a_changed_password_under_the_same_user_name() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let write = |credential: &str, user: &str, password: &str| {
            let path = dir.path().join(credential);
            std::fs::create_dir_all(&path).expect("dir");
            std::fs::write(path.join("username"), user).expect("write");
            std::fs::write(path.join("password"), password).expect("write");
        };
        write("superuser", "postgres", "one");
        write("app", "app", "two");
        write("replication", "streaming_replica", "three");
        let first = Credentials::read(dir.path()).expect("reads");
        assert_eq!(first.rotated(&first), Ok(vec![]));
        write("app", "app", "two-rotated");
        write("replication", "streaming_replica", "three-rotated");
        let second = Credentials::read(dir.path()).expect("reads");
        assert_eq!(first.rotated(&second), Ok(vec!["app", "replication"]));
        write("superuser", "admin", "one");
        let renamed = Credentials::read(dir.path()).expect("reads");
        assert_eq!(second.rotated(&renamed), Err("superuser"));
        std::fs::remove_dir_all(dir.path().join("app")).expect("remove");
        assert!(Credentials::read(dir.path()).is_err());
    }

    #[test]
    fn an_empty_or_missing_secret_is_an_error() {
        let dir = tempfile::tempdir().expect("temporary directory");
        assert!(UserSecret::from_dir(dir.path()).is_err());
        std::fs::write(dir.path().join("username"), "").expect("write");
        std::fs::write(dir.path().join("password"), "x").expect("write");
        assert!(matches!(
            UserSecret::from_dir(dir.path()),
            Err(SettingsError::EmptySecret(_))
        ));
    }
}
