//! The pod contract: what the pod the operator builds promises the
//! instance manager running inside it (`tusk instance run`). The pod
//! builder writes these names and paths, the instance manager reads them;
//! both import them from here, so neither side can drift.
//!
//! - [`InstanceEnv`]: the environment variables, and
//!   [`InstanceEnvironment`]: their typed values, parsed in one place;
//! - the mount paths ([`DATA_MOUNT`], [`PGDATA`], [`SECRETS_DIR`],
//!   [`REPOSITORIES_DIR`], ...), and [`MountDirs`]: where a repository's
//!   CA and volume are;
//! - [`Credential`]: the credentials Secrets, their names, keys and where
//!   each is mounted;
//! - [`TlsSecret`]: the cluster's certificate Secrets, their names, keys
//!   and where the ones an instance uses are mounted;
//! - [`RepositoryKeys`]: the backup repository's
//!   and the restore source's keys (S3's, or an Azure storage account's),
//!   given as environment variables from the credentials Secrets;
//! - the defaults the instance manager falls back to outside a pod.

use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

mod repository_keys;

pub use repository_keys::*;

pub use crate::instance::DEFAULT_HTTP_PORT as HTTP_PORT;

/// PostgreSQL's port inside every instance.
pub const POSTGRES_PORT: u16 = 5432;
/// pgBackRest's TLS server inside every instance (its default port): a
/// standby taking a base backup reaches its primary's files and
/// PostgreSQL through it, with the backup client's certificate
/// ([`TlsSecret::BackupClient`]).
pub const BACKUP_SERVER_PORT: u16 = 8432;
/// Where the instance's volume is mounted.
pub const DATA_MOUNT: &str = "/var/lib/postgresql/data";
/// PGDATA: a directory inside the volume, so the volume's root (which may
/// hold `lost+found`) is never the data directory.
pub const PGDATA: &str = "/var/lib/postgresql/data/pgdata";
/// Where the init container puts the `tusk` binary.
pub const CONTROLLER_DIR: &str = "/controller";
/// Where the credentials are mounted, one directory per [`Credential`].
pub const SECRETS_DIR: &str = "/etc/tusk/secrets";
/// PostgreSQL's socket directory and the manager's scratch files: on the
/// writable `/run` volume (the root file system is read-only).
pub const RUN_DIR: &str = "/run/tusk";

/// Directory under [`SECRETS_DIR`] where the backup destination's CA
/// Secret (`spec.backup.destination.caSecret`) is mounted.
pub const BACKUP_CA_MOUNT_NAME: &str = "backup-ca";
/// Key of the certificate authority in that Secret (and file name).
pub const BACKUP_CA_KEY: &str = "ca.crt";

/// Where the backup destination's CA is under the secrets directory
/// `secrets_dir` ([`SECRETS_DIR`] in a pod).
pub fn backup_ca_file(secrets_dir: &std::path::Path) -> PathBuf {
    secrets_dir.join(BACKUP_CA_MOUNT_NAME).join(BACKUP_CA_KEY)
}

/// Directory under [`SECRETS_DIR`] where the restore source's CA Secret
/// (`spec.bootstrap.recovery.source.caSecret`) is mounted.
pub const RESTORE_CA_MOUNT_NAME: &str = "restore-ca";

/// Where the restore source's CA is under `secrets_dir`.
pub fn restore_ca_file(secrets_dir: &std::path::Path) -> PathBuf {
    secrets_dir.join(RESTORE_CA_MOUNT_NAME).join(BACKUP_CA_KEY)
}

/// Directory under [`SECRETS_DIR`] where the backup destination's
/// credentials Secret is mounted when its key is a file (a GCS service
/// account's: see [`GCS_SERVICE_ACCOUNT_KEY`]); S3 keys are environment
/// variables instead ([`RepositoryKeys`]).
pub const BACKUP_CREDENTIALS_MOUNT_NAME: &str = "backup-credentials";
/// The same for the restore source's credentials Secret.
pub const RESTORE_CREDENTIALS_MOUNT_NAME: &str = "restore-credentials";
/// Key of a GCS service account's JSON key in a credentials Secret (and
/// its file name where the Secret is mounted).
pub const GCS_SERVICE_ACCOUNT_KEY: &str = "SERVICE_ACCOUNT_KEY";

/// Where the backup destination's GCS service account key is under
/// `secrets_dir`.
pub fn backup_gcs_key_file(secrets_dir: &std::path::Path) -> PathBuf {
    secrets_dir
        .join(BACKUP_CREDENTIALS_MOUNT_NAME)
        .join(GCS_SERVICE_ACCOUNT_KEY)
}

/// Where the restore source's GCS service account key is under
/// `secrets_dir`.
pub fn restore_gcs_key_file(secrets_dir: &std::path::Path) -> PathBuf {
    secrets_dir
        .join(RESTORE_CREDENTIALS_MOUNT_NAME)
        .join(GCS_SERVICE_ACCOUNT_KEY)
}

/// Where the volumes of `file://` repositories are mounted, each at
/// `<this>/<claim name>` (the backup destination's and the restore
/// source's `volumeClaim`; one mount when both name the same claim).
pub const REPOSITORIES_DIR: &str = "/var/lib/tusk/repositories";

/// The directories a pod mounts what its repositories need under: the CA
/// Secrets ([`SECRETS_DIR`]) and the volumes ([`REPOSITORIES_DIR`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountDirs {
    pub secrets: PathBuf,
    pub repositories: PathBuf,
}

impl MountDirs {
    /// The directories of the pod contract.
    pub fn in_pod() -> Self {
        MountDirs {
            secrets: SECRETS_DIR.into(),
            repositories: REPOSITORIES_DIR.into(),
        }
    }

    /// Where the volume of claim `claim` is mounted.
    pub fn repository_volume(&self, claim: &str) -> PathBuf {
        self.repositories.join(claim)
    }
}

/// The cluster's certificates, issued by the operator from a certificate
/// authority of the cluster's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsSecret {
    /// The authority's certificate alone ([`CA_KEY`]): what clients
    /// verify the server with (`sslrootcert`). Readable by whoever may
    /// connect; it holds no key.
    Ca,
    /// The authority's certificate and private key ([`TLS_CERT_KEY`],
    /// [`TLS_KEY_KEY`]): only the operator reads it, to issue and renew
    /// the two below. Never mounted.
    CaKey,
    /// PostgreSQL's server certificate, for the names of the cluster's
    /// Services, with its key and the authority's certificate. Mounted
    /// in every instance.
    Server,
    /// The replication user's client certificate (common name
    /// `streaming_replica`), with its key and the authority's certificate:
    /// standbys, `pg_basebackup` and `pg_rewind` log in with it. Mounted
    /// in every instance.
    Replication,
    /// The backup client's certificate (common name
    /// [`tusk_postgres::pgbackrest::BACKUP_CLIENT`]), with its key and the
    /// authority's certificate: the one identity pgBackRest's TLS server
    /// (8432) admits, so that the replication certificate, which only
    /// streams WAL, cannot run pgBackRest's commands (and their superuser
    /// SQL) on a primary. Mounted in every instance (any may back up as a
    /// standby), not in a restore rehearsal's pod.
    BackupClient,
    /// The key that signs the instance API's `/status` tokens
    /// ([`crate::instance::TOKEN_HEADER`]): its private key
    /// ([`TLS_KEY_KEY`]) and public key ([`TOKEN_PUBLIC_KEY`]), apart from
    /// the authority's, so that whoever may read instance reports (`tusk
    /// plan`) needs no key that issues certificates. No pod mounts it.
    TokenKey,
    /// The token key's public half ([`TOKEN_PUBLIC_KEY`]) alone, copied
    /// from [`TlsSecret::TokenKey`]'s Secret: what instances check tokens
    /// against. A Secret of its own because a node may read every Secret
    /// its pods mount, whatever keys a volume selects.
    TokenPublicKey,
}

/// Key of the public key in [`TlsSecret::TokenKey`]'s and
/// [`TlsSecret::TokenPublicKey`]'s Secrets (and file name in an instance).
pub const TOKEN_PUBLIC_KEY: &str = "token.pub";

/// Key of a certificate in a `kubernetes.io/tls` Secret (and file name).
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Key of the private key in a `kubernetes.io/tls` Secret (and file name).
pub const TLS_KEY_KEY: &str = "tls.key";
/// Key of the certificate authority in a certificate Secret (and file
/// name), as cert-manager names it.
pub const CA_KEY: &str = "ca.crt";

impl TlsSecret {
    /// The authority first: the others are issued from it.
    /// The token key before its public half, which is copied from it.
    pub const ALL: [TlsSecret; 7] = [
        Self::CaKey,
        Self::Ca,
        Self::Server,
        Self::Replication,
        Self::BackupClient,
        Self::TokenKey,
        Self::TokenPublicKey,
    ];

    /// The suffix of the Secret's name.
    fn suffix(self) -> &'static str {
        match self {
            Self::Ca => "ca",
            Self::CaKey => "ca-key",
            Self::Server => "server",
            Self::Replication => "replication-cert",
            Self::BackupClient => "backup-client-cert",
            Self::TokenKey => "api-token-key",
            Self::TokenPublicKey => "api-token-pub",
        }
    }

    /// The Secret's name in `cluster`.
    pub fn secret_name(self, cluster: &(impl NamedCluster + ?Sized)) -> String {
        format!("{}-{}", cluster.cluster_name(), self.suffix())
    }

    /// Directory under [`SECRETS_DIR`] where an instance finds it; `None`
    /// for the three no instance mounts (the authority's key and the
    /// token key stay with the operator).
    pub fn mount_name(self) -> Option<&'static str> {
        match self {
            Self::Server => Some("server-tls"),
            Self::Replication => Some("replication-tls"),
            Self::BackupClient => Some("backup-client-tls"),
            Self::TokenPublicKey => Some("api-token"),
            Self::Ca | Self::CaKey | Self::TokenKey => None,
        }
    }

    /// The directory under `secrets_dir` holding it in an instance.
    pub fn mounted_dir(self, secrets_dir: &std::path::Path) -> Option<PathBuf> {
        self.mount_name().map(|name| secrets_dir.join(name))
    }
}

/// Directory under [`SECRETS_DIR`] of the owner's own server certificate
/// (`spec.certificates.serverSecret`), when declared: PostgreSQL serves it
/// in place of [`TlsSecret::Server`]'s.
pub const POSTGRES_TLS_MOUNT: &str = "postgres-tls";

/// The names the server certificate carries: each of the cluster's
/// Services (`-rw`, `-ro`, `-r`) as a client in the namespace, in another
/// namespace, and fully qualified may write it. The first is the one an
/// instance verifies another instance by (it connects by address).
pub fn server_certificate_names(cluster: &str, namespace: &str) -> Vec<String> {
    let mut names = Vec::new();
    for service in ["rw", "ro", "r"] {
        let service = format!("{cluster}-{service}");
        names.push(service.clone());
        names.push(format!("{service}.{namespace}"));
        names.push(format!("{service}.{namespace}.svc"));
        names.push(format!("{service}.{namespace}.svc.cluster.local"));
    }
    names
}

/// The name an instance's certificate is verified by when it is reached
/// by address (by another instance, or by the operator at its API): the
/// first of [`server_certificate_names`].
pub fn instance_server_name(cluster: &str) -> String {
    format!("{cluster}-rw")
}

/// The run directory when the environment names none (outside a pod).
pub const DEFAULT_RUN_DIR: &str = "/tmp/tusk";
/// Operating-system user PostgreSQL runs as when the manager is root.
pub const DEFAULT_OS_USER: &str = "postgres";
/// Seconds a fast shutdown may take before it becomes immediate.
pub const DEFAULT_STOP_TIMEOUT_SECONDS: u64 = 20;

/// Names of the environment variables the instance manager reads.
pub struct InstanceEnv;

impl InstanceEnv {
    pub const POD_NAME: &'static str = "POD_NAME";
    pub const POD_NAMESPACE: &'static str = "POD_NAMESPACE";
    pub const POD_IP: &'static str = "POD_IP";
    pub const CLUSTER_NAME: &'static str = "CLUSTER_NAME";
    pub const PGDATA: &'static str = "PGDATA";
    pub const PG_BIN_DIR: &'static str = "PG_BIN_DIR";
    pub const SECRETS_DIR: &'static str = "TUSK_SECRETS_DIR";
    pub const REPOSITORIES_DIR: &'static str = "TUSK_REPOSITORIES_DIR";
    pub const POSTGRES_PORT: &'static str = "TUSK_POSTGRES_PORT";
    pub const HTTP_PORT: &'static str = "TUSK_HTTP_PORT";
    pub const RUN_DIR: &'static str = "TUSK_RUN_DIR";
    pub const OS_USER: &'static str = "TUSK_OS_USER";
    pub const STOP_TIMEOUT: &'static str = "TUSK_STOP_TIMEOUT";
    /// `true`: the HTTP API is served over HTTPS with the cluster's server
    /// certificate, and `/status` requires a token
    /// ([`crate::instance::TOKEN_HEADER`]). Set by the operator together
    /// with the probes' `HTTPS` scheme, so that a pod's own spec says how
    /// its API is served.
    pub const API_TLS: &'static str = "TUSK_API_TLS";
    /// The backup repository's S3 access key id (see [`RepositoryKeys`]):
    /// pgBackRest's own name, as the manager gives it.
    pub const REPOSITORY_KEY: &'static str = tusk_postgres::pgbackrest::S3_KEY_ENV;
    /// The backup repository's S3 secret access key.
    pub const REPOSITORY_KEY_SECRET: &'static str = tusk_postgres::pgbackrest::S3_KEY_SECRET_ENV;
    /// The backup repository's Azure storage account.
    pub const REPOSITORY_AZURE_ACCOUNT: &'static str = tusk_postgres::pgbackrest::AZURE_ACCOUNT_ENV;
    /// The backup repository's Azure shared key.
    pub const REPOSITORY_AZURE_KEY: &'static str = tusk_postgres::pgbackrest::AZURE_KEY_ENV;
    /// The S3 access key id of the repository a restore reads
    /// (`spec.bootstrap.recovery.source.credentialsSecret`).
    pub const SOURCE_KEY: &'static str = "TUSK_RESTORE_S3_KEY";
    /// Its S3 secret access key.
    pub const SOURCE_KEY_SECRET: &'static str = "TUSK_RESTORE_S3_KEY_SECRET";
    /// The Azure storage account of the repository a restore reads.
    pub const SOURCE_AZURE_ACCOUNT: &'static str = "TUSK_RESTORE_AZURE_ACCOUNT";
    /// Its Azure shared key.
    pub const SOURCE_AZURE_KEY: &'static str = "TUSK_RESTORE_AZURE_KEY";
}

/// The instance manager's environment, typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceEnvironment {
    /// This pod's (instance's) name.
    pub pod_name: String,
    pub namespace: String,
    /// The PostgresCluster the instance belongs to.
    pub cluster_name: String,
    /// PostgreSQL and the HTTP API listen on it.
    pub pod_ip: IpAddr,
    pub pgdata: PathBuf,
    /// Directory of `postgres`, `initdb`, `pg_basebackup`, `pg_rewind`.
    pub bin_dir: PathBuf,
    pub secrets_dir: PathBuf,
    /// Where `file://` repositories' volumes are ([`REPOSITORIES_DIR`]).
    pub repositories_dir: PathBuf,
    pub run_dir: PathBuf,
    pub postgres_port: u16,
    pub http_port: u16,
    pub os_user: String,
    pub stop_timeout_seconds: u64,
    /// Whether the HTTP API is served over HTTPS ([`InstanceEnv::API_TLS`]).
    pub api_tls: bool,
    /// The backup repository's keys, when the cluster names a credentials
    /// Secret.
    pub repository_keys: Option<RepositoryKeys>,
    /// The keys of the repository a restore reads, when the recovery
    /// source names a credentials Secret.
    pub source_keys: Option<RepositoryKeys>,
}

/// An environment the instance manager cannot run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvironmentError {
    #[error("{0} is not set")]
    Missing(&'static str),
    #[error("{name}: `{value}` is not {expected}")]
    Invalid {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
}

impl InstanceEnvironment {
    /// Reads the environment through `lookup` (the process environment, or
    /// command-line values first). Identity is required; the rest falls
    /// back to the defaults above.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvironmentError> {
        let required = |name: &'static str| lookup(name).ok_or(EnvironmentError::Missing(name));
        let or = |name: &'static str, default: &str| lookup(name).unwrap_or_else(|| default.into());
        Ok(InstanceEnvironment {
            pod_name: required(InstanceEnv::POD_NAME)?,
            namespace: required(InstanceEnv::POD_NAMESPACE)?,
            cluster_name: required(InstanceEnv::CLUSTER_NAME)?,
            pod_ip: parse(
                InstanceEnv::POD_IP,
                required(InstanceEnv::POD_IP)?,
                "an IP address",
            )?,
            pgdata: required(InstanceEnv::PGDATA)?.into(),
            bin_dir: lookup(InstanceEnv::PG_BIN_DIR)
                .unwrap_or_else(|| {
                    tusk_postgres::version::bin_dir(tusk_postgres::version::DEFAULT_MAJOR)
                })
                .into(),
            secrets_dir: or(InstanceEnv::SECRETS_DIR, SECRETS_DIR).into(),
            repositories_dir: or(InstanceEnv::REPOSITORIES_DIR, REPOSITORIES_DIR).into(),
            run_dir: or(InstanceEnv::RUN_DIR, DEFAULT_RUN_DIR).into(),
            postgres_port: lookup(InstanceEnv::POSTGRES_PORT)
                .map(|v| parse(InstanceEnv::POSTGRES_PORT, v, "a port"))
                .transpose()?
                .unwrap_or(POSTGRES_PORT),
            http_port: lookup(InstanceEnv::HTTP_PORT)
                .map(|v| parse(InstanceEnv::HTTP_PORT, v, "a port"))
                .transpose()?
                .unwrap_or(HTTP_PORT),
            os_user: or(InstanceEnv::OS_USER, DEFAULT_OS_USER),
            stop_timeout_seconds: lookup(InstanceEnv::STOP_TIMEOUT)
                .map(|v| parse(InstanceEnv::STOP_TIMEOUT, v, "a number of seconds"))
                .transpose()?
                .unwrap_or(DEFAULT_STOP_TIMEOUT_SECONDS),
            api_tls: lookup(InstanceEnv::API_TLS)
                .map(|v| parse(InstanceEnv::API_TLS, v, "true or false"))
                .transpose()?
                .unwrap_or(false),
            repository_keys: RepositoryKeys::read(&lookup, KeyNames::REPOSITORY)?,
            source_keys: RepositoryKeys::read(&lookup, KeyNames::SOURCE)?,
        })
    }
}

fn parse<T: FromStr>(
    name: &'static str,
    value: String,
    expected: &'static str,
) -> Result<T, EnvironmentError> {
    value.trim().parse().map_err(|_| EnvironmentError::Invalid {
        name,
        value,
        expected,
    })
}

/// The database users a cluster has, each in a `kubernetes.io/basic-auth`
/// Secret mounted under [`SECRETS_DIR`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    /// `postgres`, for the instance manager's own work.
    Superuser,
    /// The application database's owner.
    App,
    /// `streaming_replica`, for replicas and pg_rewind.
    Replication,
}

/// Key of the user name in a credentials Secret (and file name in its mount).
pub const USERNAME_KEY: &str = "username";
/// Key of the password in a credentials Secret (and file name in its mount).
pub const PASSWORD_KEY: &str = "password";

/// Something with a cluster name, to name its Secrets after.
pub trait NamedCluster {
    fn cluster_name(&self) -> &str;
}

impl NamedCluster for str {
    fn cluster_name(&self) -> &str {
        self
    }
}

impl Credential {
    pub const ALL: [Credential; 3] = [Self::Superuser, Self::App, Self::Replication];

    /// Directory name under [`SECRETS_DIR`], and the suffix of the Secret's
    /// name.
    pub fn mount_name(self) -> &'static str {
        match self {
            Self::Superuser => "superuser",
            Self::App => "app",
            Self::Replication => "replication",
        }
    }

    /// The Secret's name in `cluster`.
    pub fn secret_name(self, cluster: &(impl NamedCluster + ?Sized)) -> String {
        format!("{}-{}", cluster.cluster_name(), self.mount_name())
    }

    /// The fixed database user name; the application owner's is declared
    /// in the spec.
    pub fn builtin_username(self) -> Option<&'static str> {
        match self {
            Self::Superuser => Some(tusk_postgres::roles::SUPERUSER),
            Self::App => None,
            Self::Replication => Some(tusk_postgres::roles::REPLICATION),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn identity_is_required_and_the_rest_has_defaults() {
        let env = BTreeMap::from([
            (InstanceEnv::POD_NAME, "db-1"),
            (InstanceEnv::POD_NAMESPACE, "shop"),
            (InstanceEnv::CLUSTER_NAME, "db"),
            (InstanceEnv::POD_IP, "10.0.0.7"),
            (InstanceEnv::PGDATA, PGDATA),
        ]);
        let parsed = InstanceEnvironment::from_lookup(|n| env.get(n).map(|v| (*v).to_owned()))
            .expect("complete");
        assert_eq!(parsed.bin_dir, PathBuf::from("/usr/lib/postgresql/15/bin"));
        assert_eq!(parsed.run_dir, PathBuf::from(DEFAULT_RUN_DIR));
        assert_eq!((parsed.postgres_port, parsed.http_port), (5432, 8000));
        assert_eq!(parsed.stop_timeout_seconds, 20);
        assert_eq!(parsed.repository_keys, None);
        assert!(!parsed.api_tls, "plain HTTP unless the pod says otherwise");
        let mut tls = env.clone();
        tls.insert(InstanceEnv::API_TLS, "true");
        let parsed = InstanceEnvironment::from_lookup(|n| tls.get(n).map(|v| (*v).to_owned()))
            .expect("complete");
        assert!(parsed.api_tls);
        tls.insert(InstanceEnv::API_TLS, "yes");
        assert_eq!(
            InstanceEnvironment::from_lookup(|n| tls.get(n).map(|v| (*v).to_owned())),
            Err(EnvironmentError::Invalid {
                name: "TUSK_API_TLS",
                value: "yes".into(),
                expected: "true or false"
            })
        );
        assert_eq!(
            server_certificate_names("orders", "shop").first(),
            Some(&instance_server_name("orders"))
        );

        let mut keys = env.clone();
        keys.insert(InstanceEnv::REPOSITORY_KEY, "AKIA1");
        assert_eq!(
            InstanceEnvironment::from_lookup(|n| keys.get(n).map(|v| (*v).to_owned())),
            Err(EnvironmentError::Missing("PGBACKREST_REPO1_S3_KEY_SECRET"))
        );
        keys.insert(InstanceEnv::REPOSITORY_KEY_SECRET, "s3cret-key");
        let parsed = InstanceEnvironment::from_lookup(|n| keys.get(n).map(|v| (*v).to_owned()))
            .expect("complete");
        let repository = parsed.repository_keys.expect("keys");
        assert_eq!(repository.access_key_id, "AKIA1");
        assert!(!format!("{repository:?}").contains("s3cret-key"));

        let mut missing = env.clone();
        missing.remove(InstanceEnv::POD_IP);
        assert_eq!(
            InstanceEnvironment::from_lookup(|n| missing.get(n).map(|v| (*v).to_owned())),
            Err(EnvironmentError::Missing("POD_IP"))
        );
        let mut bad = env.clone();
        bad.insert(InstanceEnv::HTTP_PORT, "eighty");
        assert!(matches!(
            InstanceEnvironment::from_lookup(|n| bad.get(n).map(|v| (*v).to_owned())),
            Err(EnvironmentError::Invalid {
                name: "TUSK_HTTP_PORT",
                ..
            })
        ));
    }

    #[test]
    fn secrets_are_named_after_the_cluster_and_mounted_per_user() {
        let names: Vec<String> = Credential::ALL
            .iter()
            .map(|c| c.secret_name("orders"))
            .collect();
        assert_eq!(
            names,
            ["orders-superuser", "orders-app", "orders-replication"]
        );
        assert_eq!(
            Credential::Replication.builtin_username(),
            Some("streaming_replica")
        );
    }

    #[test]
    fn certificate_secrets_never_share_a_name_with_credentials_and_no_authority_key_is_mounted() {
        let names: Vec<String> = TlsSecret::ALL
            .iter()
            .map(|s| s.secret_name("orders"))
            .collect();
        assert_eq!(
            names,
            [
                "orders-ca-key",
                "orders-ca",
                "orders-server",
                "orders-replication-cert",
                "orders-backup-client-cert",
                "orders-api-token-key",
                "orders-api-token-pub"
            ]
        );
        for credential in Credential::ALL {
            assert!(!names.contains(&credential.secret_name("orders")));
        }
        let mounted: Vec<&str> = TlsSecret::ALL
            .iter()
            .filter_map(|s| s.mount_name())
            .collect();
        assert_eq!(
            mounted,
            [
                "server-tls",
                "replication-tls",
                "backup-client-tls",
                "api-token"
            ]
        );
        for credential in Credential::ALL {
            assert!(!mounted.contains(&credential.mount_name()));
        }
        // The token key's private half stays with the operator: the
        // instances mount the Secret of its public half.
        assert_eq!(TlsSecret::TokenKey.mount_name(), None);
        assert_eq!(TlsSecret::TokenPublicKey.mount_name(), Some("api-token"));
    }
}
