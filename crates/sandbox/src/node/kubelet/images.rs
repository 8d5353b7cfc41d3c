//! Which local executable stands for a container image.
//!
//! The sandbox pulls no images: a container runs a program already on this
//! machine, chosen by an ordered list of rules kept in a YAML file
//! (`images.yaml` in the data directory, written with the defaults on first
//! start so a user can read and edit it). The first rule whose pattern
//! matches the image's repository decides how the container's command is
//! found:
//!
//! - `tusk`: the Tusk image; its programs are the `tusk` binary itself.
//! - `postgres`: a PostgreSQL image; the major version is read from the tag
//!   (`postgres:16.4` is 16) and programs come from that major's bin
//!   directory (`postgresBinDirs`, else Debian's
//!   `/usr/lib/postgresql/<major>/bin`, else the one `scripts/setup`
//!   installs under [`INSTALLED_MAJORS`]). Where that is not the image's
//!   own path, the container's paths under `/usr/lib/postgresql/<major>`
//!   (its `PG_BIN_DIR`) are translated to it as a volume's are.
//! - `host`: programs are looked up on the host `PATH` as they are.
//!
//! An image no rule matches, or a program its runtime does not provide,
//! leaves the container waiting with reason `ImageNotMapped`: the sandbox
//! never runs a different program than the one the pod asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where `scripts/setup` installs the PostgreSQL majors Debian does not
/// package: `<this>/<major>/bin` (`tusk_postgres::version::INSTALLED_MAJORS`;
/// the sandbox knows images, not PostgreSQL, so it names the place itself).
pub const INSTALLED_MAJORS: &str = "/opt/tusk/postgresql";

/// Where a PostgreSQL image keeps the programs of `major`: Debian's layout,
/// as in the official images.
fn image_bin_dir(major: &str) -> String {
    format!("/usr/lib/postgresql/{major}/bin")
}

/// The PostgreSQL major an image's tag names (`postgres:16.4` is 16).
fn tag_major(image: &str) -> Option<String> {
    let (_, tag) = split_image(image);
    let major: String = tag
        .unwrap_or("")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!major.is_empty()).then_some(major)
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("no rule in the image mapping matches image {image:?}")]
    NoRule { image: String },
    #[error(
        "image {image:?} is a PostgreSQL image but its tag names no major version (use e.g. postgres:16)"
    )]
    NoMajor { image: String },
    #[error(
        "image {image:?} needs PostgreSQL {major}, which is not installed at {dir} (scripts/setup installs 16 to 18; or set postgresBinDirs.\"{major}\" in the image mapping)"
    )]
    NoPostgres {
        image: String,
        major: String,
        dir: PathBuf,
    },
    #[error("image {image:?} provides no program {program:?} in the sandbox")]
    NoProgram { image: String, program: String },
    #[error("container has no command and image {image:?} has no default one in the sandbox")]
    NoCommand { image: String },
    #[error("cannot read the image mapping {path}: {message}")]
    Config { path: PathBuf, message: String },
}

/// How a matching image's programs are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Tusk,
    Postgres,
    Host,
}

/// One mapping rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRule {
    /// A pattern for the repository (the image without tag or digest);
    /// `*` matches any run of characters.
    pub image: String,
    pub runtime: Runtime,
}

/// The whole mapping, as kept in `images.yaml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageMapping {
    pub rules: Vec<ImageRule>,
    /// PostgreSQL bin directories by major version, for installations
    /// outside Debian's layout (e.g. `"17": /opt/pg17/bin`).
    #[serde(default)]
    pub postgres_bin_dirs: BTreeMap<String, PathBuf>,
    /// Programs a PostgreSQL image also ships (a shell, coreutils) that are
    /// taken from the host PATH.
    #[serde(default)]
    pub postgres_host_programs: Vec<String>,
}

impl Default for ImageMapping {
    fn default() -> Self {
        let rule = |image: &str, runtime| ImageRule {
            image: image.to_owned(),
            runtime,
        };
        Self {
            rules: vec![
                rule("tusk", Runtime::Tusk),
                rule("*/tusk", Runtime::Tusk),
                rule("postgres", Runtime::Postgres),
                rule("*/postgres", Runtime::Postgres),
                rule("*/postgresql", Runtime::Postgres),
            ],
            postgres_bin_dirs: BTreeMap::new(),
            postgres_host_programs: ["sh", "bash", "cp", "mkdir", "cat", "ls", "rm", "chmod"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// The program a container runs and the arguments before its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub path: PathBuf,
    pub args: Vec<String>,
    /// A directory to put first on the process's PATH (the image's own
    /// programs, e.g. PostgreSQL's bin directory).
    pub bin_dir: Option<PathBuf>,
}

/// Splits `registry/repo:tag@digest` into repository and tag.
fn split_image(image: &str) -> (&str, Option<&str>) {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    match without_digest[last_slash..].rfind(':') {
        Some(colon) => (
            &without_digest[..last_slash + colon],
            Some(&without_digest[last_slash + colon + 1..]),
        ),
        None => (without_digest, None),
    }
}

/// Glob match with `*` only.
fn glob(pattern: &str, value: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == value,
        Some((head, rest)) => {
            let Some(tail) = value.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

impl ImageMapping {
    /// Reads the mapping from `path`, writing the defaults there first when
    /// the file does not exist.
    pub fn load_or_init(path: &Path) -> Result<Self, ImageError> {
        let config = |message: String| ImageError::Config {
            path: path.to_owned(),
            message,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => serde_yaml_ng::from_str(&text).map_err(|e| config(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mapping = Self::default();
                let text = serde_yaml_ng::to_string(&mapping).map_err(|e| config(e.to_string()))?;
                let header = "# How the sandbox kubelet maps container images to local programs.\n\
                              # See docs/sandbox.md (\"Images\").\n";
                std::fs::write(path, format!("{header}{text}"))
                    .map_err(|e| config(e.to_string()))?;
                Ok(mapping)
            }
            Err(e) => Err(config(e.to_string())),
        }
    }

    /// The directory holding PostgreSQL `major`'s programs on this machine.
    fn postgres_bin_dir(&self, major: &str) -> PathBuf {
        if let Some(dir) = self.postgres_bin_dirs.get(major) {
            return dir.clone();
        }
        let debian = PathBuf::from(image_bin_dir(major));
        let installed = Path::new(INSTALLED_MAJORS).join(major).join("bin");
        if !debian.is_dir() && installed.is_dir() {
            installed
        } else {
            debian
        }
    }

    /// For a PostgreSQL image whose programs are not where the image keeps
    /// them: the image's path (`/usr/lib/postgresql/<major>/bin`) and the
    /// directory standing for it, so that the container's paths into it
    /// are translated as a volume's are.
    pub fn image_path(&self, image: &str) -> Option<(String, PathBuf)> {
        if !matches!(self.runtime_of(image), Ok(Runtime::Postgres)) {
            return None;
        }
        let major = tag_major(image)?;
        let own = image_bin_dir(&major);
        let dir = self.postgres_bin_dir(&major);
        (dir != Path::new(&own) && dir.is_dir()).then_some((own, dir))
    }

    /// Whether this sandbox has `image` at all, as a kubelet has an image
    /// it pulled: a rule maps it and, for a PostgreSQL image, its major is
    /// installed. Checked also for a container whose program is in one of
    /// its volumes.
    pub fn available(&self, image: &str) -> Result<(), ImageError> {
        if self.runtime_of(image)? == Runtime::Postgres {
            self.installed_postgres(image)?;
        }
        Ok(())
    }

    /// The bin directory of the major a PostgreSQL image's tag names, if
    /// that major is installed.
    fn installed_postgres(&self, image: &str) -> Result<PathBuf, ImageError> {
        let major = tag_major(image).ok_or_else(|| ImageError::NoMajor {
            image: image.to_owned(),
        })?;
        let dir = self.postgres_bin_dir(&major);
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(ImageError::NoPostgres {
                image: image.to_owned(),
                major,
                dir,
            })
        }
    }

    fn runtime_of(&self, image: &str) -> Result<Runtime, ImageError> {
        let (repository, _) = split_image(image);
        self.rules
            .iter()
            .find(|rule| glob(&rule.image, repository))
            .map(|rule| rule.runtime)
            .ok_or_else(|| ImageError::NoRule {
                image: image.to_owned(),
            })
    }

    /// Resolves a container's `command` (its first word, or the image's
    /// default entrypoint when empty) to a local program. `tusk_binary` is
    /// the executable that stands for the Tusk image.
    pub fn resolve(
        &self,
        image: &str,
        command: &[String],
        tusk_binary: &Path,
    ) -> Result<Program, ImageError> {
        let runtime = self.runtime_of(image)?;
        let (first, rest) = match command.split_first() {
            Some((first, rest)) => (first.clone(), rest.to_vec()),
            None => match runtime {
                Runtime::Tusk => ("tusk".to_owned(), Vec::new()),
                Runtime::Postgres => ("postgres".to_owned(), Vec::new()),
                Runtime::Host => {
                    return Err(ImageError::NoCommand {
                        image: image.to_owned(),
                    });
                }
            },
        };
        let no_program = || ImageError::NoProgram {
            image: image.to_owned(),
            program: first.clone(),
        };
        let name = Path::new(&first)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(&first)
            .to_owned();
        let mut bin_dir = None;
        let path = match runtime {
            Runtime::Tusk if name == "tusk" => tusk_binary.to_owned(),
            Runtime::Tusk => return Err(no_program()),
            Runtime::Postgres => {
                let dir = self.installed_postgres(image)?;
                let candidate = dir.join(&name);
                bin_dir = Some(dir.clone());
                if candidate.is_file() {
                    candidate
                } else if self.postgres_host_programs.contains(&name) {
                    find_on_path(&name).ok_or_else(no_program)?
                } else {
                    return Err(no_program());
                }
            }
            Runtime::Host if first.contains('/') => PathBuf::from(&first),
            Runtime::Host => find_on_path(&first).ok_or_else(no_program)?,
        };
        Ok(Program {
            path,
            args: rest,
            bin_dir,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tusk() -> PathBuf {
        PathBuf::from("/opt/tusk/bin/tusk")
    }

    #[test]
    fn image_names_split_into_repository_and_tag() {
        assert_eq!(split_image("postgres:16.4"), ("postgres", Some("16.4")));
        assert_eq!(
            split_image("localhost:5000/team/postgres:17@sha256:ab"),
            ("localhost:5000/team/postgres", Some("17"))
        );
        assert_eq!(
            split_image("localhost:5000/tusk"),
            ("localhost:5000/tusk", None)
        );
    }

    #[test]
    fn the_tusk_image_runs_the_tusk_binary_itself() {
        let mapping = ImageMapping::default();
        let program = mapping
            .resolve(
                "ghcr.io/tusk-dev/tusk:0.1.0",
                &["/tusk/bin/tusk".into(), "instance".into()],
                &tusk(),
            )
            .expect("tusk image maps");
        assert_eq!(program.path, tusk());
        assert_eq!(program.args, vec!["instance".to_owned()]);
        let error = mapping
            .resolve("tusk:1", &["/bin/sh".into()], &tusk())
            .expect_err("tusk image has no shell");
        assert!(matches!(error, ImageError::NoProgram { .. }));
    }

    #[test]
    fn postgres_images_run_the_installed_major() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("postgres"), "").expect("write");
        let mut mapping = ImageMapping::default();
        mapping
            .postgres_bin_dirs
            .insert("17".into(), dir.path().to_owned());
        let program = mapping
            .resolve("docker.io/library/postgres:17.2", &[], &tusk())
            .expect("postgres 17 maps");
        assert_eq!(program.path, dir.path().join("postgres"));
        let missing = mapping
            .resolve("postgres:9", &[], &tusk())
            .expect_err("PostgreSQL 9 is not installed");
        assert!(matches!(missing, ImageError::NoPostgres { ref major, .. } if major == "9"));
        let untagged = mapping
            .resolve("postgres", &[], &tusk())
            .expect_err("no major without a tag");
        assert!(matches!(untagged, ImageError::NoMajor { .. }));
    }

    #[test]
    fn a_major_installed_elsewhere_stands_at_the_images_own_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut mapping = ImageMapping::default();
        mapping
            .postgres_bin_dirs
            .insert("16".into(), dir.path().to_owned());
        assert_eq!(
            mapping.image_path("postgres:16.2"),
            Some((
                "/usr/lib/postgresql/16/bin".to_owned(),
                dir.path().to_owned()
            ))
        );
        assert_eq!(mapping.image_path("ghcr.io/tusk-dev/tusk:0.1.0"), None);
        assert_eq!(mapping.image_path("postgres"), None, "no major");
        assert!(mapping.available("postgres:16").is_ok());
    }

    /// A program in one of the pod's volumes runs only in an image the
    /// sandbox has, as a kubelet runs nothing of an image it cannot pull.
    #[test]
    fn an_image_the_sandbox_does_not_have_is_not_available() {
        let mapping = ImageMapping::default();
        assert!(matches!(
            mapping.available("registry.example/unmapped:15"),
            Err(ImageError::NoRule { .. })
        ));
        assert!(matches!(
            mapping.available("postgres:9"),
            Err(ImageError::NoPostgres { .. })
        ));
        assert!(matches!(
            mapping.available("postgres:latest"),
            Err(ImageError::NoMajor { .. })
        ));
        assert!(mapping.available("tusk:1").is_ok());
    }

    #[test]
    fn an_unmapped_image_never_runs_anything() {
        let error = ImageMapping::default()
            .resolve("busybox:1.36", &["sh".into()], &tusk())
            .expect_err("busybox has no rule");
        assert!(matches!(error, ImageError::NoRule { .. }));
    }

    #[test]
    fn the_defaults_are_written_and_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("images.yaml");
        let written = ImageMapping::load_or_init(&path).expect("init");
        assert!(path.is_file());
        let read = ImageMapping::load_or_init(&path).expect("read");
        assert_eq!(written, read);
    }

    #[test]
    fn globs_match_whole_repositories() {
        assert!(glob("*/postgres", "docker.io/library/postgres"));
        assert!(!glob("*/postgres", "docker.io/library/postgres-exporter"));
        assert!(glob("tusk", "tusk"));
        assert!(!glob("tusk", "tusky"));
    }
}
