//! Volumes as directories, and the path translation that shows each one to
//! a process at its `mountPath`.
//!
//! The sandbox must work for a non-root user on a laptop, where mount
//! namespaces may not be available, so volumes are not mounted (the one
//! exception, the ServiceAccount token path, is `isolation`'s). Every
//! volume is a directory on the host: a claim's persistent directory, or a
//! per-pod directory `<data dir>/volumes/<pod uid>/<name>` holding an emptyDir or
//! the files of a secret, configMap, downward API or projected volume. A container
//! sees a volume at its `mountPath` through translation: wherever a mount
//! path appears as a whole path prefix in the container's command, args,
//! env values or working directory, it is replaced by the host directory.
//! The container's termination message file is translated the same way
//! from its `terminationMessagePath` (see `termination`). The mappings are
//! also given to the process as `TUSK_SANDBOX_MOUNTS` (`mountPath=hostPath`
//! pairs joined by `:`), so a program that builds paths at run time can
//! translate them the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    Container, DownwardAPIVolumeSource, KeyToPath, Pod, ProjectedVolumeSource, Volume,
};

use super::atomic_writer::WriteError;
use super::files::{FileOwner, key_files};
use super::input_error::InputError;
use super::inputs::PodInputs;
use super::projected::ProjectionError;

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("cannot prepare volume {volume:?} at {path}: {source}")]
    Io {
        volume: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("volume {volume:?}: {source}")]
    Input { volume: String, source: InputError },
    #[error("volume {volume:?} has a kind the sandbox does not support ({kind})")]
    Unsupported { volume: String, kind: String },
    #[error("container mounts volume {0:?}, which the pod does not declare")]
    Undeclared(String),
    #[error("subPath {0:?} must be a relative path inside the volume")]
    SubPath(String),
}

fn io(volume: &str, path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError {
    let (volume, path) = (volume.to_owned(), path.to_owned());
    move |source| VolumeError::Io {
        volume,
        path,
        source,
    }
}

fn chown(volume: &str, path: &Path, owner: Option<FileOwner>) -> Result<(), VolumeError> {
    if let Some(owner) = owner {
        std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid))
            .map_err(io(volume, path))?;
    }
    Ok(())
}

/// Writes `files` (relative path, content, mode) under `dir` as the
/// kubelet's atomic writer does (see [`super::atomic_writer`]); true when
/// anything changed.
pub fn write_files(
    volume: &str,
    dir: &Path,
    files: &[(String, Vec<u8>, u32)],
    owner: Option<FileOwner>,
) -> Result<bool, VolumeError> {
    super::atomic_writer::write(dir, files, owner).map_err(|error| match error {
        WriteError::Path(path) => VolumeError::SubPath(path),
        WriteError::Io { path, source } => VolumeError::Io {
            volume: volume.to_owned(),
            path,
            source,
        },
    })
}

/// The files of a downwardAPI volume.
fn downward_files(
    pod: &Pod,
    volume: &str,
    downward: &DownwardAPIVolumeSource,
) -> Result<Vec<(String, Vec<u8>, u32)>, VolumeError> {
    let mode = downward.default_mode.map_or(0o644, |m| m as u32);
    let mut files = Vec::new();
    for item in downward.items.iter().flatten() {
        let Some(field) = &item.field_ref else {
            return Err(VolumeError::Unsupported {
                volume: volume.to_owned(),
                kind: "downwardAPI resourceFieldRef".into(),
            });
        };
        let value = super::env::field_value(pod, &field.field_path).map_err(|source| {
            VolumeError::Input {
                volume: volume.to_owned(),
                source,
            }
        })?;
        let item_mode = item.mode.map_or(mode, |m| m as u32);
        files.push((item.path.clone(), value.into_bytes(), item_mode));
    }
    Ok(files)
}

/// The files of a projected volume.
fn projected_files(
    pod: &Pod,
    volume: &str,
    projected: &ProjectedVolumeSource,
    inputs: &PodInputs,
) -> Result<Vec<(String, Vec<u8>, u32)>, VolumeError> {
    super::projected::files(pod, volume, projected, inputs).map_err(|e| match e {
        ProjectionError::Input(source) => VolumeError::Input {
            volume: volume.to_owned(),
            source,
        },
        ProjectionError::Unsupported(kind) => VolumeError::Unsupported {
            volume: volume.to_owned(),
            kind: kind.into(),
        },
    })
}

/// A `secret` or `configMap` volume's source: its keys become files.
struct KeySource<'a> {
    secret: bool,
    name: &'a str,
    items: Option<&'a Vec<KeyToPath>>,
    mode: u32,
    optional: bool,
}

impl<'a> KeySource<'a> {
    fn of(volume: &'a Volume) -> Option<Self> {
        let mode = |m: Option<i32>| m.map_or(0o644, |m| m as u32);
        if let Some(secret) = &volume.secret {
            return Some(KeySource {
                secret: true,
                name: secret.secret_name.as_deref().unwrap_or_default(),
                items: secret.items.as_ref(),
                mode: mode(secret.default_mode),
                optional: secret.optional.unwrap_or(false),
            });
        }
        volume.config_map.as_ref().map(|config_map| KeySource {
            secret: false,
            name: &config_map.name,
            items: config_map.items.as_ref(),
            mode: mode(config_map.default_mode),
            optional: config_map.optional.unwrap_or(false),
        })
    }

    /// The source's data; an error when it is missing and not optional.
    fn data(&self, inputs: &PodInputs) -> Result<BTreeMap<String, Vec<u8>>, InputError> {
        if self.secret {
            inputs.secret(self.name, self.optional)
        } else {
            inputs.config_map(self.name, self.optional)
        }
    }

    /// The source's data when the source exists.
    fn present<'i>(&self, inputs: &'i PodInputs) -> Option<&'i BTreeMap<String, Vec<u8>>> {
        if self.secret {
            inputs.secrets.get(self.name)
        } else {
            inputs.config_maps.get(self.name)
        }
    }

    fn files(&self, data: &BTreeMap<String, Vec<u8>>) -> Vec<(String, Vec<u8>, u32)> {
        key_files(data, self.items, self.mode)
    }
}

/// Prepares every volume of `pod` (its own ones under `volumes_dir`, claims
/// where they are bound) and returns the host directory of each, by name.
pub fn materialise(
    pod: &Pod,
    volumes_dir: &Path,
    inputs: &PodInputs,
    owner: Option<FileOwner>,
) -> Result<BTreeMap<String, PathBuf>, VolumeError> {
    let volumes: &[Volume] = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    let mut dirs = BTreeMap::new();
    for volume in volumes {
        let name = volume.name.as_str();
        let dir = volumes_dir.join(name);
        let input = |source| VolumeError::Input {
            volume: name.to_owned(),
            source,
        };
        let host = if let Some(claim) = &volume.persistent_volume_claim {
            let dir = inputs.claim_dir(&claim.claim_name).map_err(input)?;
            std::fs::create_dir_all(&dir).map_err(io(name, &dir))?;
            dir
        } else if volume.empty_dir.is_some() {
            std::fs::create_dir_all(&dir).map_err(io(name, &dir))?;
            chown(name, &dir, owner)?;
            dir
        } else if let Some(source) = KeySource::of(volume) {
            let data = source.data(inputs).map_err(input)?;
            write_files(name, &dir, &source.files(&data), owner)?;
            dir
        } else if let Some(downward) = &volume.downward_api {
            write_files(name, &dir, &downward_files(pod, name, downward)?, owner)?;
            dir
        } else if let Some(projected) = &volume.projected {
            write_files(
                name,
                &dir,
                &projected_files(pod, name, projected, inputs)?,
                owner,
            )?;
            dir
        } else {
            return Err(VolumeError::Unsupported {
                volume: name.to_owned(),
                kind: "only persistentVolumeClaim, emptyDir, secret, configMap, downwardAPI and projected"
                    .into(),
            });
        };
        dirs.insert(name.to_owned(), host);
    }
    Ok(dirs)
}

/// Rewrites `pod`'s Secret and ConfigMap volumes from `inputs` where their
/// source changed, as the kubelet does while a pod runs (projected
/// volumes are not rewritten; their tokens are replaced on their own).
/// A source that is gone keeps its last content, as on Kubernetes.
/// Returns the volumes rewritten.
pub fn refresh(
    pod: &Pod,
    volumes_dir: &Path,
    inputs: &PodInputs,
    owner: Option<FileOwner>,
) -> Result<Vec<String>, VolumeError> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let mut changed = Vec::new();
    for volume in volumes {
        let Some(source) = KeySource::of(volume) else {
            continue;
        };
        let Some(data) = source.present(inputs) else {
            continue;
        };
        let files = source.files(data);
        let dir = volumes_dir.join(&volume.name);
        if write_files(&volume.name, &dir, &files, owner)? {
            changed.push(volume.name.clone());
        }
    }
    Ok(changed)
}

/// Where a container's mount paths are on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mounts {
    /// (mountPath, host path), longest mount path first.
    pairs: Vec<(String, PathBuf)>,
    /// (a directory above mount paths, its place in the container's root
    /// tree), longest first: `/etc/tusk/secrets` when volumes are mounted
    /// at `/etc/tusk/secrets/a` and `/etc/tusk/secrets/b`.
    parents: Vec<(String, PathBuf)>,
}

impl Mounts {
    /// The container's mounts; `root` is where its root tree is built: a
    /// directory per parent of a mount path with a symbolic link per
    /// mount, so a program that joins names to a parent directory at run
    /// time (`$SECRETS_DIR/<name>`) finds the volumes.
    pub fn for_container(
        container: &Container,
        volume_dirs: &BTreeMap<String, PathBuf>,
        root: &Path,
    ) -> Result<Self, VolumeError> {
        let mut pairs = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            let dir = volume_dirs
                .get(&mount.name)
                .ok_or_else(|| VolumeError::Undeclared(mount.name.clone()))?;
            let host = match mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
                Some(sub) if Path::new(sub).is_absolute() || sub.split('/').any(|p| p == "..") => {
                    return Err(VolumeError::SubPath(sub.to_owned()));
                }
                Some(sub) => {
                    let host = dir.join(sub);
                    std::fs::create_dir_all(&host).map_err(io(&mount.name, &host))?;
                    host
                }
                None => dir.clone(),
            };
            let path = mount.mount_path.trim_end_matches('/');
            pairs.push((if path.is_empty() { "/" } else { path }.to_owned(), host));
        }
        pairs.sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
        let under_a_mount = |path: &str| {
            pairs
                .iter()
                .any(|(mount, _)| mount != path && Path::new(path).starts_with(mount))
        };
        let mut parents: Vec<(String, PathBuf)> = Vec::new();
        for (mount, host) in &pairs {
            if under_a_mount(mount) || mount == "/" {
                continue;
            }
            let link = root.join(mount.trim_start_matches('/'));
            if let Some(parent) = link.parent() {
                std::fs::create_dir_all(parent).map_err(io(mount, parent))?;
            }
            if link.symlink_metadata().is_ok() {
                std::fs::remove_file(&link).map_err(io(mount, &link))?;
            }
            std::os::unix::fs::symlink(host, &link).map_err(io(mount, &link))?;
            for ancestor in Path::new(mount).ancestors().skip(1) {
                let text = ancestor.to_string_lossy().into_owned();
                if text == "/" || under_a_mount(&text) || parents.iter().any(|(p, _)| *p == text) {
                    continue;
                }
                parents.push((text.clone(), root.join(text.trim_start_matches('/'))));
            }
        }
        parents.sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
        Ok(Self { pairs, parents })
    }

    /// Adds a file shown to the container at `path` (its termination
    /// message file), translated as a mount path is. It adds no parent
    /// directory to the root tree: translating a bare `/dev` for every
    /// container to a tree holding this one file would hide the real one.
    pub fn with_file(mut self, path: &str, host: &Path) -> Self {
        self.pairs.push((path.to_owned(), host.to_owned()));
        self.pairs
            .sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
        self
    }

    /// Replaces every mount path that appears in `text` as a whole path
    /// prefix (followed by `/` or by a character that cannot be in a path
    /// component) with its host directory.
    pub fn translate(&self, text: &str) -> String {
        let is_name = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '-');
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let mut previous: Option<char> = None;
        'scan: while !rest.is_empty() {
            let starts_path = previous.is_none_or(|c| !is_name(c) && c != '/');
            if starts_path {
                // A mount path may be followed by more path; a parent
                // directory only stands alone (`/etc` but not `/etc/passwd`).
                let mounts = self.pairs.iter().map(|pair| (pair, true));
                let parents = self.parents.iter().map(|pair| (pair, false));
                for ((mount, host), deeper) in mounts.chain(parents) {
                    if let Some(after) = rest.strip_prefix(mount.as_str())
                        && after
                            .chars()
                            .next()
                            .is_none_or(|c| !is_name(c) && (deeper || c != '/'))
                    {
                        out.push_str(&host.to_string_lossy());
                        previous = mount.chars().last();
                        rest = after;
                        continue 'scan;
                    }
                }
            }
            let Some(c) = rest.chars().next() else { break };
            out.push(c);
            previous = Some(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    /// Whether `path` (already translated) lies inside one of the volumes.
    pub fn holds(&self, path: &Path) -> bool {
        self.pairs.iter().any(|(_, host)| path.starts_with(host))
    }

    /// The `TUSK_SANDBOX_MOUNTS` value.
    pub fn describe(&self) -> String {
        self.pairs
            .iter()
            .map(|(mount, host)| format!("{mount}={}", host.display()))
            .collect::<Vec<_>>()
            .join(":")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mounts(pairs: &[(&str, &str)]) -> Mounts {
        let mut pairs: Vec<(String, PathBuf)> = pairs
            .iter()
            .map(|(m, h)| ((*m).to_owned(), PathBuf::from(h)))
            .collect();
        pairs.sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
        Mounts {
            pairs,
            parents: Vec::new(),
        }
    }

    #[test]
    fn mount_paths_are_translated_only_as_whole_path_prefixes() {
        let m = mounts(&[
            ("/var/lib/pg", "/h/pvc"),
            ("/var/lib/pg/wal", "/h/wal"),
            ("/etc/conf", "/h/conf"),
        ]);
        assert_eq!(m.translate("/var/lib/pg/data"), "/h/pvc/data");
        assert_eq!(m.translate("--wal=/var/lib/pg/wal/x"), "--wal=/h/wal/x");
        assert_eq!(m.translate("/var/lib/pgsql"), "/var/lib/pgsql");
        assert_eq!(m.translate("/opt/var/lib/pg"), "/opt/var/lib/pg");
        assert_eq!(
            m.translate("cat /etc/conf/a && ls /etc/conf"),
            "cat /h/conf/a && ls /h/conf"
        );
        assert_eq!(m.translate("PGDATA=\"/var/lib/pg\""), "PGDATA=\"/h/pvc\"");
    }

    #[test]
    fn a_file_mount_is_translated_as_a_whole_path_only() {
        let m = mounts(&[("/var/lib/pg", "/h/pvc")])
            .with_file("/dev/termination-log", Path::new("/h/msg/main"));
        assert_eq!(m.translate("/dev/termination-log"), "/h/msg/main");
        assert_eq!(
            m.translate("echo done > /dev/termination-log; cat /var/lib/pg/x"),
            "echo done > /h/msg/main; cat /h/pvc/x"
        );
        assert_eq!(
            m.translate("/dev/termination-logs"),
            "/dev/termination-logs"
        );
        assert_eq!(m.translate("/dev"), "/dev");
        assert_eq!(m.translate("/dev/null"), "/dev/null");
        assert!(m.describe().contains("/dev/termination-log=/h/msg/main"));
    }

    #[test]
    fn volumes_become_directories_and_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "db-1", "namespace": "shop", "labels": {"app": "db"}},
            "spec": {
                "containers": [{"name": "main", "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/conf"},
                    {"name": "scratch", "mountPath": "/tmp/scratch", "subPath": "a/b"}
                ]}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}},
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
                    {"name": "conf", "configMap": {"name": "conf", "items": [{"key": "a", "path": "sub/a.conf"}]}},
                    {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
                ]
            }
        }))
        .expect("pod");
        let mut inputs = PodInputs::default();
        inputs
            .claims
            .insert("data-db-1".into(), dir.path().join("claims/pvc-1"));
        inputs.secrets.insert(
            "creds".into(),
            BTreeMap::from([("password".into(), b"s3cret".to_vec())]),
        );
        inputs.config_maps.insert(
            "conf".into(),
            BTreeMap::from([
                ("a".into(), b"x=1".to_vec()),
                ("b".into(), b"ignored".to_vec()),
            ]),
        );
        let pod_dir = dir.path().join("pod");
        let dirs = materialise(&pod, &pod_dir, &inputs, None).expect("materialise");
        assert_eq!(dirs["data"], dir.path().join("claims/pvc-1"));
        assert!(dirs["data"].is_dir());
        assert!(dirs["scratch"].is_dir());
        let password = dirs["creds"].join("password");
        assert_eq!(std::fs::read(&password).expect("secret file"), b"s3cret");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&password)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);
        assert_eq!(
            std::fs::read(dirs["conf"].join("sub/a.conf")).expect("conf"),
            b"x=1"
        );
        assert!(!dirs["conf"].join("b").exists());
        assert_eq!(
            std::fs::read_to_string(dirs["info"].join("labels")).expect("labels"),
            "app=\"db\""
        );
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        let root = dir.path().join("root");
        let mounts = Mounts::for_container(container, &dirs, &root).expect("mounts");
        assert_eq!(
            mounts.translate("/tmp/scratch/file"),
            format!("{}/a/b/file", dirs["scratch"].display())
        );
        assert!(dirs["scratch"].join("a/b").is_dir());
        // /etc holds a mount: it is translated to the root tree, where the
        // mount is a link to its volume.
        assert_eq!(
            mounts.translate("/etc"),
            root.join("etc").display().to_string()
        );
        let through_parent = PathBuf::from(mounts.translate("/etc")).join("conf/sub/a.conf");
        assert_eq!(
            std::fs::read(through_parent).expect("conf via parent"),
            b"x=1"
        );
        assert_eq!(mounts.translate("/etcetera"), "/etcetera");
        assert_eq!(mounts.translate("/etc/passwd"), "/etc/passwd");
    }

    #[test]
    fn a_missing_secret_is_an_error_unless_optional() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pod = |optional: bool| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "p"},
                "spec": {"containers": [], "volumes": [
                    {"name": "s", "secret": {"secretName": "absent", "optional": optional}}
                ]}
            }))
            .expect("pod")
        };
        let inputs = PodInputs::default();
        let error =
            materialise(&pod(false), dir.path(), &inputs, None).expect_err("missing secret");
        assert!(error.to_string().contains("absent"), "{error}");
        materialise(&pod(true), dir.path(), &inputs, None).expect("optional secret");
    }
}
