//! The typed readings of a PostgresCluster's spec, shared by the operator
//! and the instance managers so that both read a declaration the same
//! way: the WAL archive, the restore source, the synchronous rule, the
//! server parameters and the bootstrap names.

use std::collections::BTreeMap;

use tusk_postgres::pgbackrest::{RecoveryTarget, Repository, RepositoryError, RestoreSource};
use tusk_postgres::synchronous::{Synchronous, SynchronousError};

use super::*;
use crate::contract::MountDirs;

impl ObjectStore {
    /// Whether the credentials Secret's key is a file, mounted where the
    /// pod contract says (a GCS bucket's service account key), rather
    /// than environment variables (S3's keys).
    pub fn credentials_are_a_file(&self) -> bool {
        self.url.starts_with("gs://")
    }

    /// The repository this destination names, trusting the CA mounted at
    /// `ca` when it names a CA Secret, signing in to GCS with the key
    /// mounted at `key` when it names a credentials Secret, on the volume
    /// mounted under `dirs` when it names a claim.
    fn repository(
        &self,
        dirs: &MountDirs,
        ca: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<Repository, RepositoryError> {
        let volume = self
            .volume_claim
            .as_deref()
            .map(|claim| dirs.repository_volume(claim).display().to_string());
        // pgBackRest signs in to Azure with a storage account's key alone
        // (no ambient credentials here).
        if self.url.starts_with("az://") && self.credentials_secret.is_none() {
            return Err(RepositoryError::AzureWithoutKey(self.url.clone()));
        }
        Ok(Repository::parse(
            &self.url,
            self.endpoint.as_deref(),
            self.region.as_deref(),
            volume.as_deref(),
        )?
        .with_ca_file(self.ca_secret.as_ref().map(|_| ca.display().to_string()))
        .with_gcs_key_file(
            self.credentials_secret
                .as_ref()
                .map(|_| key.display().to_string()),
        ))
    }
}

impl PostgresClusterSpec {
    /// Where WAL is archived: `spec.backup.destination` when `walArchiving`
    /// is on, as pgBackRest's repository, with its CA or volume where the
    /// pod contract mounts them under `dirs`, and the retention of backups.
    /// `None` when WAL is not archived; an error for a destination
    /// archiving does not support yet.
    pub fn wal_archive(&self, dirs: &MountDirs) -> Option<Result<Repository, RepositoryError>> {
        let backup = self.backup.as_ref().filter(|b| b.wal_archiving)?;
        let ca = crate::contract::backup_ca_file(&dirs.secrets);
        let key = crate::contract::backup_gcs_key_file(&dirs.secrets);
        Some(
            backup
                .destination
                .repository(dirs, &ca, &key)
                .map(|mut repository| {
                    repository.retention_days = u32::try_from(backup.retention_days).ok();
                    repository
                }),
        )
    }

    /// Where a restore reads (`spec.bootstrap.recovery`): the source's
    /// repository, with its CA or volume where the pod contract mounts
    /// them under `dirs`; `None` for a cluster created by `initdb`; an
    /// error for a source restores do not support yet.
    pub fn restore_source(
        &self,
        namespace: &str,
        dirs: &MountDirs,
    ) -> Option<Result<RestoreSource, RepositoryError>> {
        let recovery = self.bootstrap.as_ref()?.recovery.as_ref()?;
        let ca = crate::contract::restore_ca_file(&dirs.secrets);
        let key = crate::contract::restore_gcs_key_file(&dirs.secrets);
        let repository = recovery.source.repository(dirs, &ca, &key);
        let target = match (
            &recovery.target_time,
            &recovery.target_lsn,
            &recovery.target_name,
        ) {
            (Some(time), _, _) => RecoveryTarget::Time(time.clone()),
            (None, Some(lsn), _) => RecoveryTarget::Lsn(lsn.clone()),
            (None, None, Some(name)) => RecoveryTarget::Name(name.clone()),
            (None, None, None) => RecoveryTarget::Latest,
        };
        Some(repository.map(|repository| {
            RestoreSource {
                repository,
                namespace: recovery
                    .namespace
                    .clone()
                    .unwrap_or_else(|| namespace.to_owned()),
                cluster: recovery.cluster.clone(),
                target,
            }
        }))
    }

    /// The declared synchronous replication, checked against the number of
    /// instances: the one reading shared by the operator and the instance
    /// managers. `None` for asynchronous replication.
    pub fn synchronous(&self) -> Result<Option<Synchronous>, SynchronousError> {
        self.replication
            .as_ref()
            .and_then(|r| r.synchronous.as_ref())
            .map(|sync| {
                let instances = u32::try_from(self.instances).unwrap_or(0);
                Synchronous::new(sync.mode, i64::from(sync.number), instances)
            })
            .transpose()
    }

    /// The server parameters the instances run with:
    /// `spec.postgres.parameters`, with `synchronous_commit` owned by the
    /// operator while `dataDurability` is `required` (see
    /// [`tusk_postgres::parameters::durable_synchronous_commit`]).
    pub fn server_parameters(&self) -> BTreeMap<String, String> {
        let required = self.failover.data_durability == DataDurability::Required;
        tusk_postgres::parameters::with_commit_durability(&self.postgres.parameters, required)
    }

    /// The application database and its owner: `spec.bootstrap.initdb`, or
    /// the defaults when the cluster is not bootstrapped by `initdb`.
    pub fn initdb(&self) -> InitdbSpec {
        self.bootstrap
            .as_ref()
            .and_then(|b| b.initdb.clone())
            .unwrap_or_default()
    }
}
