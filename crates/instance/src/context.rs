//! One instance's fixed facts (settings, the PostgreSQL user) and the
//! operations on them that several modules share: rendering and writing the
//! configuration for a role, the local connection, the password file.

use std::net::IpAddr;

use crate::datadir::{self, DataDirError, RenderedFiles};
use crate::desired::DesiredState;
use tusk_postgres::pgbackrest::{self, Repository, Stanza};

use crate::postgres::config::{self, ClientTls, ReplicationRole, ServerConfig, Upstream};
use crate::process_user::{ProcessUser, ProcessUserError};
use crate::settings::Settings;
use crate::sql::LocalTarget;
use crate::tls::{Installed, Mounted, TlsError};
use tusk_api::contract::{TLS_CERT_KEY, TlsSecret, instance_server_name};

/// A connection to another instance that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(transparent)]
    Postgres(#[from] tokio_postgres::Error),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Settings plus the user PostgreSQL runs as.
#[derive(Clone, Debug)]
pub struct InstanceContext {
    pub settings: Settings,
    pub user: ProcessUser,
    /// Whether the PostgreSQL build can serve TLS ([`crate::tls::build_has_ssl`]).
    ssl_build: bool,
    /// Whether its libpq knows `require_auth`
    /// ([`crate::tls::libpq_has_require_auth`]).
    require_auth: bool,
    /// The standby minimums of the data directory's control file
    /// ([`crate::standby_floor`]).
    floor: crate::standby_floor::FloorCache,
}

impl InstanceContext {
    pub fn new(settings: Settings) -> Result<Self, ProcessUserError> {
        let user = ProcessUser::detect(&settings.os_user)?;
        let ssl_build = crate::tls::build_has_ssl(&settings.bin_dir);
        if !ssl_build {
            tracing::warn!(
                bin_dir = %settings.bin_dir.display(),
                "this PostgreSQL build has no SSL support: connections stay unencrypted whatever certificates are mounted"
            );
        }
        let require_auth = crate::tls::libpq_has_require_auth(&settings.bin_dir);
        if ssl_build && !require_auth {
            tracing::info!(
                bin_dir = %settings.bin_dir.display(),
                "this libpq predates require_auth (PostgreSQL 16): connections to other instances verify the server's name but cannot refuse a password request"
            );
        }
        Ok(InstanceContext {
            settings,
            user,
            ssl_build,
            require_auth,
            floor: Default::default(),
        })
    }

    pub fn local_target(&self) -> LocalTarget<'_> {
        LocalTarget {
            socket_dir: &self.settings.run_dir,
            port: self.settings.postgres_port,
            superuser: &self.settings.credentials.superuser.username,
        }
    }

    /// Prepares the run directory (socket, password file, the private
    /// copies of the cluster's certificates) for PostgreSQL; true when a
    /// certificate changed.
    pub fn prepare_run_dir(&self) -> Result<bool, DataDirError> {
        self.user.private_dir(&self.settings.run_dir)?;
        let replication = &self.settings.credentials.replication;
        let pgpass = config::render_pgpass(&replication.username, replication.password.expose())?;
        self.user.private_file(&self.settings.passfile(), &pgpass)?;
        self.install_certificates()
    }

    /// Copies the mounted certificates where PostgreSQL and libpq read
    /// them ([`crate::tls`]); true when a copy changed.
    pub fn install_certificates(&self) -> Result<bool, DataDirError> {
        match (Mounted::read(&self.settings.secrets_dir)?, self.tls()) {
            (Some(mounted), Some(installed)) => {
                self.user.private_dir(&self.settings.run_dir)?;
                Ok(installed.install(&mounted, &self.user)?)
            }
            _ => Ok(false),
        }
    }

    /// Where the private copies of the cluster's certificates are, when
    /// the pod mounts them and PostgreSQL can serve TLS (it is off
    /// otherwise).
    pub fn tls(&self) -> Option<Installed> {
        if !self.ssl_build {
            return None;
        }
        let server = TlsSecret::Server.mounted_dir(&self.settings.secrets_dir)?;
        server
            .join(TLS_CERT_KEY)
            .exists()
            .then(|| Installed::in_run_dir(&self.settings.run_dir))
    }

    /// libpq's environment for PostgreSQL's programs that connect to
    /// another instance (`pg_basebackup`, `pg_rewind`): the replication
    /// user's certificate and the authority to verify the server by.
    pub fn libpq_tls_env(&self) -> Vec<(&'static str, String)> {
        let client = self.client_tls();
        client
            .iter()
            .flat_map(|client| client.environment())
            .map(|(name, value)| (name, value.to_owned()))
            .collect()
    }

    /// The replication user's TLS settings for connections to another
    /// instance of this cluster, verified as `<cluster>-rw`; `None` without
    /// certificates.
    pub fn client_tls(&self) -> Option<ClientTls> {
        self.tls().map(|installed| {
            installed.client(
                instance_server_name(&self.settings.cluster_name),
                self.require_auth,
            )
        })
    }

    /// How PostgreSQL's programs name the instance at `address`: the
    /// verified name and the address (`host`, `hostaddr`) with
    /// certificates, the address alone without.
    pub fn remote_host(&self, address: IpAddr) -> (String, Option<String>) {
        match self.client_tls() {
            Some(tls) => (tls.server_name, Some(address.to_string())),
            None => (address.to_string(), None),
        }
    }

    /// A connection to the `postgres` database of the instance at `host`,
    /// as the replication user: over TLS with the cluster's certificates
    /// when the pod mounts them (the server verified as the cluster's
    /// `-rw` name, which its certificate carries).
    pub async fn connect_remote(
        &self,
        host: IpAddr,
    ) -> Result<tokio_postgres::Client, RemoteError> {
        let replication = &self.settings.credentials.replication;
        let mut config = tokio_postgres::Config::new();
        config
            .port(self.settings.postgres_port)
            .user(&replication.username)
            .password(replication.password.expose())
            .dbname("postgres")
            .application_name("tusk-instance-manager")
            .connect_timeout(std::time::Duration::from_secs(3));
        let mounted = match self.tls() {
            Some(_) => Mounted::read(&self.settings.secrets_dir)?,
            None => None,
        };
        match mounted {
            Some(mounted) => {
                config
                    .host(instance_server_name(&self.settings.cluster_name))
                    .hostaddr(host);
                let (client, connection) = config.connect(mounted.connector()?).await?;
                tokio::spawn(connection);
                Ok(client)
            }
            None => {
                config.host(host.to_string());
                let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                Ok(client)
            }
        }
    }

    /// Where a standby of the primary at `host` streams from.
    pub fn upstream(&self, host: IpAddr) -> Upstream {
        Upstream {
            host,
            port: self.settings.postgres_port,
            user: self.settings.credentials.replication.username.clone(),
            passfile: self.settings.passfile().display().to_string(),
            tls: self.client_tls(),
        }
    }

    /// The configuration files of the data directory `pgdata` for `role`
    /// under `desired`; parameter values are held to the rules of the
    /// major its `PG_VERSION` names (a staging directory's too, so a first
    /// bootstrap never starts with a value its major refuses).
    pub fn render(
        &self,
        pgdata: &std::path::Path,
        desired: &DesiredState,
        role: ReplicationRole,
    ) -> Result<RenderedFiles, DataDirError> {
        // A standby starts only with its primary's minimums or more.
        let parameters = if role.is_standby() {
            let floor = self.floor.read(&self.settings.bin_dir, pgdata);
            crate::standby_floor::raise(&desired.parameters, &floor)
        } else {
            desired.parameters.clone()
        };
        if pgdata == self.settings.pgdata {
            let held = crate::standby_floor::held(&desired.parameters, &parameters);
            self.floor.set_held(held);
        }
        let server = ServerConfig {
            instance_name: self.settings.pod_name.clone(),
            listen_address: self.settings.pod_ip,
            port: self.settings.postgres_port,
            socket_dir: config::socket_dir_setting(&self.settings.run_dir),
            role,
            synchronous: desired.synchronous.clone(),
            parameters,
            major: crate::datadir::data_major_version(pgdata).ok(),
            archive_command: desired.archiving.as_ref().map(|_| {
                pgbackrest::archive_command(
                    &self.pgbackrest_config().display().to_string(),
                    &self.settings.cluster_name,
                )
            }),
            tls: self.tls().map(|installed| installed.server()),
        };
        RenderedFiles::render(
            &server,
            &self.settings.credentials.superuser.username,
            &self.settings.credentials.replication.username,
            &[self.user.manager_name.as_str(), self.user.name.as_str()],
            desired.superuser_access,
        )
    }

    /// Renders and writes the configuration of `pgdata` for `role`,
    /// including `standby.signal` and pgBackRest's configuration when WAL
    /// is archived; true when `postgresql.conf` or the access files
    /// changed.
    pub fn write_config(
        &self,
        pgdata: &std::path::Path,
        desired: &DesiredState,
        role: ReplicationRole,
    ) -> Result<bool, DataDirError> {
        if let Some(repository) = &desired.archiving {
            self.write_pgbackrest_config(repository)?;
        }
        let standby = role.is_standby();
        let changed = self
            .render(pgdata, desired, role)?
            .write(pgdata, &self.user)?;
        datadir::set_standby_signal(pgdata, &self.user, standby)?;
        Ok(changed)
    }
}

impl InstanceContext {
    /// pgBackRest's configuration file (see `Settings::pgbackrest_dir`).
    pub fn pgbackrest_config(&self) -> std::path::PathBuf {
        self.settings.pgbackrest_dir().join("pgbackrest.conf")
    }

    /// This cluster's stanza in `repository`.
    pub fn stanza(&self, repository: &Repository) -> Stanza {
        let settings = &self.settings;
        self.stanza_of(repository, &settings.namespace, &settings.cluster_name)
    }

    /// The stanza of cluster `cluster` of `namespace` in `repository`, as
    /// this instance reaches it (a restore reads another cluster's).
    pub fn stanza_of(&self, repository: &Repository, namespace: &str, cluster: &str) -> Stanza {
        let dir = self.settings.pgbackrest_dir();
        let text = |path: std::path::PathBuf| path.display().to_string();
        let settings = &self.settings;
        Stanza {
            name: cluster.to_owned(),
            repository_path: repository.cluster_path(namespace, cluster),
            repository: repository.clone(),
            pgdata: text(settings.pgdata.clone()),
            socket_dir: config::socket_dir_setting(&settings.run_dir),
            port: settings.postgres_port,
            superuser: settings.credentials.superuser.username.clone(),
            spool_path: text(dir.join("spool")),
            log_path: text(dir.join("log")),
            lock_path: text(settings.run_dir.join("pgbackrest")),
        }
    }

    /// Writes `pgbackrest.conf` for `repository` (when it changed) and the
    /// directories it names, owned by the PostgreSQL user.
    fn write_pgbackrest_config(&self, repository: &Repository) -> Result<(), DataDirError> {
        let stanza = self.stanza(repository);
        let conf = pgbackrest::render_conf(&stanza)?;
        for dir in [&stanza.spool_path, &stanza.log_path] {
            self.user.private_dir(std::path::Path::new(dir))?;
        }
        self.user.private_dir(&self.settings.pgbackrest_dir())?;
        let path = self.pgbackrest_config();
        if std::fs::read_to_string(&path).ok().as_deref() != Some(conf.as_str()) {
            self.user.private_file(&path, &conf)?;
        }
        Ok(())
    }

    /// pgBackRest's configuration for a restore from `source` (its own
    /// file: the cluster's own configuration never names another
    /// cluster's repository), written with the directories it names.
    pub fn write_restore_config(
        &self,
        source: &crate::desired::RestoreSource,
    ) -> Result<std::path::PathBuf, DataDirError> {
        let stanza = self.stanza_of(&source.repository, &source.namespace, &source.cluster);
        let conf = pgbackrest::render_conf(&stanza)?;
        self.user.private_dir(&self.settings.pgbackrest_dir())?;
        self.user
            .private_dir(std::path::Path::new(&stanza.log_path))?;
        let path = self.settings.pgbackrest_dir().join("restore.conf");
        self.user.private_file(&path, &conf)?;
        Ok(path)
    }

    /// The restore source's keys, as pgBackRest reads them for its first
    /// repository.
    pub fn restore_env(&self) -> Vec<(&'static str, &str)> {
        self.settings
            .source_keys
            .iter()
            .flat_map(|keys| keys.environment())
            .collect()
    }

    /// The standby minimums this instance's configuration holds above
    /// their declared value ([`crate::standby_floor`]).
    pub fn held_minimums(&self) -> Vec<String> {
        self.floor.held()
    }

    /// The environment pgBackRest needs (the repository's keys), for
    /// PostgreSQL (whose `archive_command` runs it) and for the commands
    /// the manager runs itself.
    pub fn pgbackrest_env(&self) -> Vec<(&'static str, &str)> {
        self.settings
            .repository_keys
            .iter()
            .flat_map(|keys| keys.environment())
            .collect()
    }
}
