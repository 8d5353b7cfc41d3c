//! The typed readings of a PostgresCluster's spec, shared by the operator
//! and the instance managers so that both read a declaration the same
//! way: the WAL archive, the restore source, the synchronous rule, the
//! server parameters and the bootstrap names.

use std::collections::BTreeMap;

use tusk_postgres::pgbackrest::{RecoveryTarget, RepositoryError, RestoreSource, S3Repository};
use tusk_postgres::synchronous::{Synchronous, SynchronousError};

use super::*;

impl PostgresClusterSpec {
    /// Where WAL is archived: `spec.backup.destination` when `walArchiving`
    /// is on, as pgBackRest's repository, with the CA mounted where the pod
    /// contract puts it under `secrets_dir` and the retention of backups.
    /// `None` when WAL is not archived; an error for a destination archiving does not support yet.
    pub fn wal_archive(
        &self,
        secrets_dir: &std::path::Path,
    ) -> Option<Result<S3Repository, RepositoryError>> {
        let backup = self.backup.as_ref().filter(|b| b.wal_archiving)?;
        let destination = &backup.destination;
        Some(
            S3Repository::parse(
                &destination.url,
                destination.endpoint.as_deref(),
                destination.region.as_deref(),
            )
            .map(|mut repository| {
                repository.ca_file = destination.ca_secret.as_ref().map(|_| {
                    crate::contract::backup_ca_file(secrets_dir)
                        .display()
                        .to_string()
                });
                repository.retention_days = u32::try_from(backup.retention_days).ok();
                repository
            }),
        )
    }

    /// Where a restore reads (`spec.bootstrap.recovery`): the source's
    /// repository, with its CA mounted where the pod contract puts it
    /// under `secrets_dir`; `None` for a cluster created by `initdb`; an
    /// error for a source restores do not support yet.
    pub fn restore_source(
        &self,
        namespace: &str,
        secrets_dir: &std::path::Path,
    ) -> Option<Result<RestoreSource, RepositoryError>> {
        let recovery = self.bootstrap.as_ref()?.recovery.as_ref()?;
        let source = &recovery.source;
        let repository = S3Repository::parse(
            &source.url,
            source.endpoint.as_deref(),
            source.region.as_deref(),
        )
        .map(|mut repository| {
            repository.ca_file = source.ca_secret.as_ref().map(|_| {
                crate::contract::restore_ca_file(secrets_dir)
                    .display()
                    .to_string()
            });
            repository
        });
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
