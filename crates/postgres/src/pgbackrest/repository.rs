//! Where pgBackRest keeps a cluster's backups and archived WAL: an S3 (or
//! S3-compatible) bucket, a Google Cloud Storage bucket, or a directory
//! tree on a mounted volume (pgBackRest's `posix` repository), read from a
//! destination URL.
//!
//! - `s3://bucket[/prefix]`, with an optional endpoint (`https://host[:port]`,
//!   an S3-compatible service, addressed path-style) and region;
//! - `gs://bucket[/prefix]`, with an optional endpoint (a service speaking
//!   GCS's JSON API elsewhere than `storage.googleapis.com`), signed in
//!   with a service account's JSON key file or, without one, with the
//!   credentials the environment provides (workload identity, the
//!   metadata server: pgBackRest's `auto`);
//! - `az://container[/prefix]`: an Azure Blob Storage container, at
//!   `<account>.blob.core.windows.net` or, with an endpoint, at a service
//!   speaking Azure's Blob API elsewhere (addressed path-style,
//!   `https://host:port/<account>/<container>`, as Azurite is), signed in
//!   with the storage account's shared key, which pgBackRest reads from
//!   [`super::AZURE_ACCOUNT_ENV`] and [`super::AZURE_KEY_ENV`] in its environment;
//! - `file:///path`: `path` inside a volume the caller has mounted at
//!   `root`. Every instance that archives, backs up or restores mounts the
//!   same volume, so it must be shareable between them (ReadWriteMany when
//!   they run on different nodes).
//!
//! Each cluster keeps its files under its own path,
//! `<prefix>/<namespace>/<cluster>` ([`Repository::cluster_path`]), so two
//! clusters sharing a bucket or a volume never mix their WAL.

use std::fmt::Write as _;

/// The region pgBackRest is given when the destination names none (S3
/// needs one to sign requests; S3-compatible servers accept any).
pub const DEFAULT_REGION: &str = "us-east-1";

/// A destination pgBackRest cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RepositoryError {
    #[error(
        "`{0}` is neither an s3://bucket[/prefix], a gs://bucket[/prefix], an \
         az://container[/prefix] nor a file:///path URL"
    )]
    Scheme(String),
    #[error("endpoint `{0}` is not an http(s)://host[:port] URL")]
    Endpoint(String),
    #[error("endpoint `{0}` uses plain HTTP; pgBackRest speaks only HTTPS to object stores")]
    PlainHttp(String),
    #[error("`{0}` contains a line break")]
    LineBreak(String),
    #[error(
        "`{0}` is a directory, which must be on a volume every instance mounts: \
         name its PersistentVolumeClaim in volumeClaim"
    )]
    NoVolume(String),
    #[error("`{0}` is an object store: volumeClaim applies to file:///path URLs only")]
    VolumeForObjectStore(String),
    #[error(
        "`{0}` is a directory on a volume: an endpoint applies to object stores only, a region to S3 only"
    )]
    EndpointForVolume(String),
    #[error(
        "`{0}` is a GCS bucket: a region applies to S3 only (a GCS bucket's location is its own)"
    )]
    RegionForGcs(String),
    #[error(
        "`{0}` is an Azure container: a region applies to S3 only (a storage account's location is its own)"
    )]
    RegionForAzure(String),
    #[error(
        "`{0}` is an Azure container: name a credentialsSecret with keys AZURE_STORAGE_ACCOUNT \
         and AZURE_STORAGE_KEY (the storage account and its shared key)"
    )]
    AzureWithoutKey(String),
    #[error("`{0}` climbs out of its volume (`..`)")]
    OutsideVolume(String),
}

/// A repository: where it stores, under which prefix, and how long it
/// keeps backups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repository {
    pub store: Store,
    /// Path inside the bucket or volume under which clusters archive,
    /// without leading or trailing `/` (empty for its root).
    pub prefix: String,
    /// Days full backups are kept (pgBackRest's time-based retention: a
    /// full backup older than this goes only once a newer one covers the
    /// whole window, so point-in-time recovery to any moment inside it
    /// stays possible; WAL older than the oldest kept backup goes with
    /// it). `None` keeps everything.
    pub retention_days: Option<u32>,
}

/// The storage behind a [`Repository`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Store {
    S3(S3Bucket),
    Gcs(GcsBucket),
    Azure(AzureContainer),
    /// A volume mounted at `root` (pgBackRest's `posix` repository type).
    Volume {
        root: String,
    },
}

/// An S3 (or S3-compatible) bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Bucket {
    pub bucket: String,
    /// Host of the S3 service; `s3.<region>.amazonaws.com` when `None`.
    pub endpoint_host: Option<String>,
    pub endpoint_port: Option<u16>,
    pub region: String,
    /// PEM file of the certificate authority that signed the service's
    /// certificate, when it is not a public one.
    pub ca_file: Option<String>,
}

/// A Google Cloud Storage bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcsBucket {
    pub bucket: String,
    /// Host of a service speaking GCS's JSON API; `storage.googleapis.com`
    /// when `None`.
    pub endpoint_host: Option<String>,
    pub endpoint_port: Option<u16>,
    /// PEM file of the certificate authority that signed the service's
    /// certificate, when it is not a public one.
    pub ca_file: Option<String>,
    /// A service account's JSON key file (pgBackRest's key type
    /// `service`); `None` signs in with the environment's credentials
    /// (`auto`: workload identity or the metadata server).
    pub key_file: Option<String>,
}

/// An Azure Blob Storage container. The storage account and its key
/// are not here: pgBackRest reads both from its environment
/// ([`super::AZURE_ACCOUNT_ENV`], [`super::AZURE_KEY_ENV`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AzureContainer {
    pub container: String,
    /// Host of a service speaking Azure's Blob API, addressed path-style;
    /// `<account>.blob.core.windows.net` when `None`.
    pub endpoint_host: Option<String>,
    pub endpoint_port: Option<u16>,
    /// PEM file of the certificate authority that signed the service's
    /// certificate, when it is not a public one.
    pub ca_file: Option<String>,
}

impl Repository {
    /// The repository `url` names: an S3 bucket (with `endpoint` and
    /// `region`), or a directory of the volume mounted at `volume_root`
    /// (`None`: no volume is declared, and a `file://` URL is refused).
    pub fn parse(
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
        volume_root: Option<&str>,
    ) -> Result<Self, RepositoryError> {
        match (url.starts_with("file://"), volume_root) {
            (true, None) => Err(RepositoryError::NoVolume(url.to_owned())),
            (true, Some(_)) if endpoint.is_some() || region.is_some() => {
                Err(RepositoryError::EndpointForVolume(url.to_owned()))
            }
            (true, Some(root)) => Self::volume(url, root),
            (false, Some(_))
                if ["s3://", "gs://", "az://"]
                    .iter()
                    .any(|s| url.starts_with(s)) =>
            {
                Err(RepositoryError::VolumeForObjectStore(url.to_owned()))
            }
            (false, _) if url.starts_with("gs://") => Self::gcs(url, endpoint, region),
            (false, _) if url.starts_with("az://") => Self::azure(url, endpoint, region),
            (false, _) => Self::s3(url, endpoint, region),
        }
    }

    /// The S3 repository a destination URL (`s3://bucket/prefix`),
    /// endpoint (`https://host:port`) and region describe. An endpoint
    /// means an S3-compatible service, addressed path-style.
    pub fn s3(
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Self, RepositoryError> {
        let (bucket, prefix) = bucket_and_prefix(url, "s3://")?;
        let (endpoint_host, endpoint_port) = optional_endpoint(endpoint)?;
        let region = region.unwrap_or(DEFAULT_REGION).to_owned();
        no_line_break(&region)?;
        Ok(Repository {
            store: Store::S3(S3Bucket {
                bucket,
                endpoint_host,
                endpoint_port,
                region,
                ca_file: None,
            }),
            prefix,
            retention_days: None,
        })
    }

    /// The GCS repository a destination URL (`gs://bucket/prefix`) and
    /// endpoint (`https://host:port`, a service other than Google's)
    /// describe, signing in with the environment's credentials until
    /// [`Repository::with_gcs_key_file`] names a key. GCS takes no region.
    pub fn gcs(
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Self, RepositoryError> {
        let (bucket, prefix) = bucket_and_prefix(url, "gs://")?;
        if region.is_some() {
            return Err(RepositoryError::RegionForGcs(url.to_owned()));
        }
        let (endpoint_host, endpoint_port) = optional_endpoint(endpoint)?;
        Ok(Repository {
            store: Store::Gcs(GcsBucket {
                bucket,
                endpoint_host,
                endpoint_port,
                ca_file: None,
                key_file: None,
            }),
            prefix,
            retention_days: None,
        })
    }

    /// The Azure repository a destination URL (`az://container/prefix`)
    /// and endpoint (`https://host:port`, a service other than Azure's,
    /// addressed path-style) describe. Azure takes no region.
    pub fn azure(
        url: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
    ) -> Result<Self, RepositoryError> {
        let (container, prefix) = bucket_and_prefix(url, "az://")?;
        if region.is_some() {
            return Err(RepositoryError::RegionForAzure(url.to_owned()));
        }
        let (endpoint_host, endpoint_port) = optional_endpoint(endpoint)?;
        Ok(Repository {
            store: Store::Azure(AzureContainer {
                container,
                endpoint_host,
                endpoint_port,
                ca_file: None,
            }),
            prefix,
            retention_days: None,
        })
    }

    /// The repository `file:///path` names on the volume mounted at `root`.
    pub fn volume(url: &str, root: &str) -> Result<Self, RepositoryError> {
        let path = url
            .strip_prefix("file://")
            .filter(|p| p.starts_with('/'))
            .ok_or_else(|| RepositoryError::Scheme(url.to_owned()))?;
        if path.split('/').any(|part| part == "..") {
            return Err(RepositoryError::OutsideVolume(url.to_owned()));
        }
        for value in [url, root] {
            no_line_break(value)?;
        }
        Ok(Repository {
            store: Store::Volume {
                root: root.trim_end_matches('/').to_owned(),
            },
            prefix: path.trim_matches('/').to_owned(),
            retention_days: None,
        })
    }

    /// The repository trusting `ca_file` for its service's certificate
    /// (a bucket's; a volume has none).
    pub fn with_ca_file(mut self, ca_file: Option<String>) -> Self {
        match &mut self.store {
            Store::S3(bucket) => bucket.ca_file = ca_file,
            Store::Gcs(bucket) => bucket.ca_file = ca_file,
            Store::Azure(container) => container.ca_file = ca_file,
            Store::Volume { .. } => {}
        }
        self
    }

    /// The repository signing in with the service account key in
    /// `key_file` (a GCS bucket's; S3 keys come from the environment, a
    /// volume has none).
    pub fn with_gcs_key_file(mut self, key_file: Option<String>) -> Self {
        if let Store::Gcs(bucket) = &mut self.store {
            bucket.key_file = key_file;
        }
        self
    }

    /// Where the cluster `cluster` of `namespace` keeps its files: a path
    /// in the bucket, or an absolute path under the volume's mount.
    pub fn cluster_path(&self, namespace: &str, cluster: &str) -> String {
        let path = self.path_in_store(namespace, cluster);
        match &self.store {
            Store::S3(_) | Store::Gcs(_) | Store::Azure(_) => path,
            Store::Volume { root } => format!("{root}{path}"),
        }
    }

    /// The URL of `file` (a path under the cluster's own, such as
    /// `backup/<stanza>/<label>`), as the destination's URL names it:
    /// `s3://bucket/...`, `gs://bucket/...`, `az://container/...`, or
    /// `file:///...` inside the volume.
    pub fn url_of(&self, namespace: &str, cluster: &str, file: &str) -> String {
        let path = self.path_in_store(namespace, cluster);
        match &self.store {
            Store::S3(s3) => format!("s3://{}{path}/{file}", s3.bucket),
            Store::Gcs(gcs) => format!("gs://{}{path}/{file}", gcs.bucket),
            Store::Azure(azure) => format!("az://{}{path}/{file}", azure.container),
            Store::Volume { .. } => format!("file://{path}/{file}"),
        }
    }

    /// `/<prefix>/<namespace>/<cluster>` inside the bucket or volume.
    fn path_in_store(&self, namespace: &str, cluster: &str) -> String {
        let mut path = String::from("/");
        if !self.prefix.is_empty() {
            path.push_str(&self.prefix);
            path.push('/');
        }
        let _ = write!(path, "{namespace}/{cluster}");
        path
    }

    /// The repository as messages name it: `s3://bucket`, `gs://bucket`,
    /// `az://container` or `the volume at <root>`.
    pub fn describe(&self) -> String {
        match &self.store {
            Store::S3(s3) => format!("s3://{}", s3.bucket),
            Store::Gcs(gcs) => format!("gs://{}", gcs.bucket),
            Store::Azure(azure) => format!("az://{}", azure.container),
            Store::Volume { root } => format!("the volume at {root}"),
        }
    }

    /// pgBackRest's `repo1-*` options for it, with `path` as `repo1-path`.
    pub(super) fn options(&self, path: &str) -> Vec<(&'static str, String)> {
        let mut options = match &self.store {
            Store::S3(s3) => s3.options(path),
            Store::Gcs(gcs) => gcs.options(path),
            Store::Azure(azure) => azure.options(path),
            Store::Volume { .. } => {
                vec![("repo1-type", "posix".into()), ("repo1-path", path.into())]
            }
        };
        if let Some(days) = self.retention_days {
            options.push(("repo1-retention-full-type", "time".into()));
            options.push(("repo1-retention-full", days.to_string()));
        }
        options
    }
}

impl S3Bucket {
    fn options(&self, path: &str) -> Vec<(&'static str, String)> {
        let endpoint = self
            .endpoint_host
            .clone()
            .unwrap_or_else(|| format!("s3.{}.amazonaws.com", self.region));
        let mut options: Vec<(&str, String)> = vec![
            ("repo1-type", "s3".into()),
            ("repo1-path", path.into()),
            ("repo1-s3-bucket", self.bucket.clone()),
            ("repo1-s3-endpoint", endpoint),
            ("repo1-s3-region", self.region.clone()),
        ];
        if self.endpoint_host.is_some() {
            // S3-compatible services rarely resolve bucket.host names.
            options.push(("repo1-s3-uri-style", "path".into()));
        }
        if let Some(port) = self.endpoint_port {
            options.push(("repo1-storage-port", port.to_string()));
        }
        if let Some(ca) = &self.ca_file {
            options.push(("repo1-storage-ca-file", ca.clone()));
        }
        options
    }
}

impl GcsBucket {
    fn options(&self, path: &str) -> Vec<(&'static str, String)> {
        let mut options: Vec<(&str, String)> = vec![
            ("repo1-type", "gcs".into()),
            ("repo1-path", path.into()),
            ("repo1-gcs-bucket", self.bucket.clone()),
        ];
        // pgBackRest takes a GCS endpoint's port in the endpoint itself
        // (`repo1-storage-port` is for S3 and Azure only).
        match (&self.endpoint_host, self.endpoint_port) {
            (Some(host), Some(port)) => {
                options.push(("repo1-gcs-endpoint", format!("{host}:{port}")));
            }
            (Some(host), None) => options.push(("repo1-gcs-endpoint", host.clone())),
            (None, _) => {}
        }
        match &self.key_file {
            Some(key) => {
                options.push(("repo1-gcs-key-type", "service".into()));
                options.push(("repo1-gcs-key", key.clone()));
            }
            None => options.push(("repo1-gcs-key-type", "auto".into())),
        }
        if let Some(ca) = &self.ca_file {
            options.push(("repo1-storage-ca-file", ca.clone()));
        }
        options
    }
}

impl AzureContainer {
    fn options(&self, path: &str) -> Vec<(&'static str, String)> {
        let mut options: Vec<(&str, String)> = vec![
            ("repo1-type", "azure".into()),
            ("repo1-path", path.into()),
            ("repo1-azure-container", self.container.clone()),
        ];
        if let Some(host) = &self.endpoint_host {
            // A service other than Azure's (Azurite and the like) is
            // reached at its own host, the account in the path.
            options.push(("repo1-azure-endpoint", host.clone()));
            options.push(("repo1-azure-uri-style", "path".into()));
        }
        if let Some(port) = self.endpoint_port {
            options.push(("repo1-storage-port", port.to_string()));
        }
        if let Some(ca) = &self.ca_file {
            options.push(("repo1-storage-ca-file", ca.clone()));
        }
        options
    }
}

/// The bucket and the prefix (without leading or trailing `/`) of
/// `<scheme>bucket[/prefix]`.
fn bucket_and_prefix(url: &str, scheme: &str) -> Result<(String, String), RepositoryError> {
    let rest = url
        .strip_prefix(scheme)
        .ok_or_else(|| RepositoryError::Scheme(url.to_owned()))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(RepositoryError::Scheme(url.to_owned()));
    }
    no_line_break(url)?;
    Ok((bucket.to_owned(), prefix.trim_matches('/').to_owned()))
}

/// The host and port of an optional `https://host[:port]` endpoint.
fn optional_endpoint(
    endpoint: Option<&str>,
) -> Result<(Option<String>, Option<u16>), RepositoryError> {
    match endpoint {
        Some(endpoint) => {
            let (host, port) = parse_endpoint(endpoint)?;
            Ok((Some(host), port))
        }
        None => Ok((None, None)),
    }
}

fn parse_endpoint(endpoint: &str) -> Result<(String, Option<u16>), RepositoryError> {
    let bad = || RepositoryError::Endpoint(endpoint.to_owned());
    if endpoint.starts_with("http://") {
        return Err(RepositoryError::PlainHttp(endpoint.to_owned()));
    }
    let rest = endpoint.strip_prefix("https://").ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
            (host, Some(port.parse::<u16>().map_err(|_| bad())?))
        }
        _ => (authority, None),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

/// Refuses a value that would break pgBackRest's configuration file.
pub(super) fn no_line_break(value: &str) -> Result<(), RepositoryError> {
    if value.contains(['\n', '\r']) {
        return Err(RepositoryError::LineBreak(value.to_owned()));
    }
    Ok(())
}
