//! One instance's fixed facts (settings, the PostgreSQL user) and the
//! operations on them that several modules share: rendering and writing the
//! configuration for a role, the local connection, the password file.

use std::net::IpAddr;

use crate::datadir::{self, DataDirError, RenderedFiles};
use crate::desired::DesiredState;
use crate::postgres::config::{self, ReplicationRole, ServerConfig, Upstream};
use crate::process_user::{ProcessUser, ProcessUserError};
use crate::settings::Settings;
use crate::sql::LocalTarget;

/// Settings plus the user PostgreSQL runs as.
#[derive(Clone, Debug)]
pub struct InstanceContext {
    pub settings: Settings,
    pub user: ProcessUser,
}

impl InstanceContext {
    pub fn new(settings: Settings) -> Result<Self, ProcessUserError> {
        let user = ProcessUser::detect(&settings.os_user)?;
        Ok(InstanceContext { settings, user })
    }

    pub fn local_target(&self) -> LocalTarget<'_> {
        LocalTarget {
            socket_dir: &self.settings.run_dir,
            port: self.settings.postgres_port,
            superuser: &self.settings.credentials.superuser.username,
        }
    }

    /// Prepares the run directory (socket, password file) for PostgreSQL.
    pub fn prepare_run_dir(&self) -> Result<(), DataDirError> {
        self.user.private_dir(&self.settings.run_dir)?;
        let replication = &self.settings.credentials.replication;
        let pgpass = config::render_pgpass(&replication.username, replication.password.expose())?;
        self.user.private_file(&self.settings.passfile(), &pgpass)?;
        Ok(())
    }

    /// A connection to the `postgres` database of the instance at `host`,
    /// as the replication user.
    pub async fn connect_remote(
        &self,
        host: IpAddr,
    ) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let replication = &self.settings.credentials.replication;
        let (client, connection) = tokio_postgres::Config::new()
            .host(host.to_string())
            .port(self.settings.postgres_port)
            .user(&replication.username)
            .password(replication.password.expose())
            .dbname("postgres")
            .application_name("tusk-instance-manager")
            .connect_timeout(std::time::Duration::from_secs(3))
            .connect(tokio_postgres::NoTls)
            .await?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// Where a standby of the primary at `host` streams from.
    pub fn upstream(&self, host: IpAddr) -> Upstream {
        Upstream {
            host,
            port: self.settings.postgres_port,
            user: self.settings.credentials.replication.username.clone(),
            passfile: self.settings.passfile().display().to_string(),
        }
    }

    /// The configuration files for `role` under `desired`.
    pub fn render(
        &self,
        desired: &DesiredState,
        role: ReplicationRole,
    ) -> Result<RenderedFiles, DataDirError> {
        let server = ServerConfig {
            instance_name: self.settings.pod_name.clone(),
            listen_address: self.settings.pod_ip,
            port: self.settings.postgres_port,
            socket_dir: config::socket_dir_setting(&self.settings.run_dir),
            role,
            synchronous: desired.synchronous.clone(),
            parameters: desired.parameters.clone(),
        };
        RenderedFiles::render(
            &server,
            &self.settings.credentials.superuser.username,
            &self.settings.credentials.replication.username,
            &[self.user.manager_name.as_str(), self.user.name.as_str()],
        )
    }

    /// Renders and writes the configuration of `pgdata` for `role`,
    /// including `standby.signal`; true when `postgresql.conf` or the
    /// access files changed.
    pub fn write_config(
        &self,
        pgdata: &std::path::Path,
        desired: &DesiredState,
        role: ReplicationRole,
    ) -> Result<bool, DataDirError> {
        let standby = matches!(role, ReplicationRole::Standby(_));
        let changed = self.render(desired, role)?.write(pgdata, &self.user)?;
        datadir::set_standby_signal(pgdata, &self.user, standby)?;
        Ok(changed)
    }
}
