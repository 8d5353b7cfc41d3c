//! The keys a repository is signed in to with: an S3 access key pair, or
//! an Azure storage account and its shared key. The pod takes them from
//! the credentials Secret into environment variables
//! ([`KeyNames::REPOSITORY`] for the backup destination,
//! [`KeyNames::SOURCE`] for the restore source); the instance manager
//! hands them to pgBackRest under the names it reads for its first
//! repository. Never a file, an argument or a log (`Debug` redacts the
//! secret). (A GCS service account key is a file: see
//! [`super::GCS_SERVICE_ACCOUNT_KEY`].)

use super::{EnvironmentError, InstanceEnv};
use tusk_postgres::pgbackrest::{AZURE_ACCOUNT_ENV, AZURE_KEY_ENV, S3_KEY_ENV, S3_KEY_SECRET_ENV};

/// Key of the access key id in an S3 credentials Secret.
pub const S3_ACCESS_KEY_ID: &str = "ACCESS_KEY_ID";
/// Key of the secret access key in an S3 credentials Secret.
pub const S3_SECRET_ACCESS_KEY: &str = "SECRET_ACCESS_KEY";
/// Key of the storage account's name in an Azure credentials Secret.
pub const AZURE_STORAGE_ACCOUNT: &str = "AZURE_STORAGE_ACCOUNT";
/// Key of the storage account's shared key in an Azure credentials Secret.
pub const AZURE_STORAGE_KEY: &str = "AZURE_STORAGE_KEY";

/// The service a key pair signs in to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyService {
    S3,
    Azure,
}

impl KeyService {
    /// The service of a destination URL whose keys are environment
    /// variables (`s3://`, `az://`); `None` for the others (a GCS key is
    /// a file, a volume has none).
    pub fn of_url(url: &str) -> Option<Self> {
        if url.starts_with("s3://") {
            Some(KeyService::S3)
        } else if url.starts_with("az://") {
            Some(KeyService::Azure)
        } else {
            None
        }
    }

    /// The keys of its credentials Secret: the id's, the secret's.
    pub fn secret_keys(self) -> [&'static str; 2] {
        match self {
            KeyService::S3 => [S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY],
            KeyService::Azure => [AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY],
        }
    }

    /// The names pgBackRest reads them under, for its first repository.
    fn pgbackrest_names(self) -> [&'static str; 2] {
        match self {
            KeyService::S3 => [S3_KEY_ENV, S3_KEY_SECRET_ENV],
            KeyService::Azure => [AZURE_ACCOUNT_ENV, AZURE_KEY_ENV],
        }
    }
}

/// The pod's environment variables of one repository's keys, for each
/// service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyNames {
    pub s3: [&'static str; 2],
    pub azure: [&'static str; 2],
}

impl KeyNames {
    /// The backup destination's: pgBackRest's own names.
    pub const REPOSITORY: KeyNames = KeyNames {
        s3: [
            InstanceEnv::REPOSITORY_KEY,
            InstanceEnv::REPOSITORY_KEY_SECRET,
        ],
        azure: [
            InstanceEnv::REPOSITORY_AZURE_ACCOUNT,
            InstanceEnv::REPOSITORY_AZURE_KEY,
        ],
    };
    /// The restore source's.
    pub const SOURCE: KeyNames = KeyNames {
        s3: [InstanceEnv::SOURCE_KEY, InstanceEnv::SOURCE_KEY_SECRET],
        azure: [
            InstanceEnv::SOURCE_AZURE_ACCOUNT,
            InstanceEnv::SOURCE_AZURE_KEY,
        ],
    };

    /// The names of `service`'s keys.
    pub fn of(self, service: KeyService) -> [&'static str; 2] {
        match service {
            KeyService::S3 => self.s3,
            KeyService::Azure => self.azure,
        }
    }
}

/// A repository's keys.
#[derive(Clone, PartialEq, Eq)]
pub struct RepositoryKeys {
    pub service: KeyService,
    /// S3's access key id, or the Azure storage account's name.
    pub access_key_id: String,
    /// S3's secret access key, or the Azure storage account's shared key.
    pub secret_access_key: String,
}

impl RepositoryKeys {
    /// An S3 key pair.
    pub fn s3(access_key_id: String, secret_access_key: String) -> Self {
        RepositoryKeys {
            service: KeyService::S3,
            access_key_id,
            secret_access_key,
        }
    }

    /// The environment pgBackRest is given.
    pub fn environment(&self) -> [(&'static str, &str); 2] {
        let [id, secret] = self.service.pgbackrest_names();
        [(id, &self.access_key_id), (secret, &self.secret_access_key)]
    }

    /// The keys under `names` in the environment `lookup` reads: S3's or
    /// Azure's (both named, or none of a service's); `None` when neither.
    pub fn read(
        lookup: &impl Fn(&str) -> Option<String>,
        names: KeyNames,
    ) -> Result<Option<Self>, EnvironmentError> {
        for service in [KeyService::S3, KeyService::Azure] {
            let [id, secret] = names.of(service);
            match (lookup(id), lookup(secret)) {
                (Some(access_key_id), Some(secret_access_key)) => {
                    return Ok(Some(RepositoryKeys {
                        service,
                        access_key_id,
                        secret_access_key,
                    }));
                }
                (None, None) => {}
                (Some(_), None) => return Err(EnvironmentError::Missing(secret)),
                (None, Some(_)) => return Err(EnvironmentError::Missing(id)),
            }
        }
        Ok(None)
    }
}

impl std::fmt::Debug for RepositoryKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepositoryKeys")
            .field("service", &self.service)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(
        pairs: &[(&str, &str)],
        names: KeyNames,
    ) -> Result<Option<RepositoryKeys>, EnvironmentError> {
        let env: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        RepositoryKeys::read(&|n: &str| env.get(n).map(|v| (*v).to_owned()), names)
    }

    #[test]
    fn azure_keys_reach_pgbackrest_under_its_azure_names() {
        let keys = read(
            &[
                ("TUSK_RESTORE_AZURE_ACCOUNT", "shopbackups"),
                ("TUSK_RESTORE_AZURE_KEY", "c2VjcmV0"),
            ],
            KeyNames::SOURCE,
        )
        .expect("complete")
        .expect("keys");
        assert_eq!(keys.service, KeyService::Azure);
        assert_eq!(
            keys.environment(),
            [
                ("PGBACKREST_REPO1_AZURE_ACCOUNT", "shopbackups"),
                ("PGBACKREST_REPO1_AZURE_KEY", "c2VjcmV0")
            ]
        );
        assert!(!format!("{keys:?}").contains("c2VjcmV0"));
        // The backup destination's are pgBackRest's own names.
        let keys = read(
            &[
                ("PGBACKREST_REPO1_AZURE_ACCOUNT", "shopbackups"),
                ("PGBACKREST_REPO1_AZURE_KEY", "c2VjcmV0"),
            ],
            KeyNames::REPOSITORY,
        )
        .expect("complete");
        assert_eq!(keys.map(|k| k.service), Some(KeyService::Azure));
    }

    #[test]
    fn half_a_pair_names_what_is_missing_and_s3_keys_keep_their_names() {
        assert_eq!(
            read(&[("TUSK_RESTORE_AZURE_ACCOUNT", "shop")], KeyNames::SOURCE),
            Err(EnvironmentError::Missing("TUSK_RESTORE_AZURE_KEY"))
        );
        assert_eq!(read(&[], KeyNames::SOURCE), Ok(None));
        let keys = read(
            &[
                ("TUSK_RESTORE_S3_KEY", "AKIA1"),
                ("TUSK_RESTORE_S3_KEY_SECRET", "s3cret"),
            ],
            KeyNames::SOURCE,
        )
        .expect("complete")
        .expect("keys");
        assert_eq!(
            keys.environment(),
            [
                ("PGBACKREST_REPO1_S3_KEY", "AKIA1"),
                ("PGBACKREST_REPO1_S3_KEY_SECRET", "s3cret")
            ]
        );
    }

    #[test]
    fn each_url_takes_its_services_secret_keys() {
        assert_eq!(
            KeyService::of_url("az://backups/shop").map(KeyService::secret_keys),
            Some(["AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"])
        );
        assert_eq!(
            KeyService::of_url("s3://backups").map(KeyService::secret_keys),
            Some(["ACCESS_KEY_ID", "SECRET_ACCESS_KEY"])
        );
        assert_eq!(KeyService::of_url("gs://backups"), None);
        assert_eq!(KeyService::of_url("file:///backups"), None);
    }
}
