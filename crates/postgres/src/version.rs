//! PostgreSQL version rules: which major versions Tusk supports, where
//! their programs live, and which binaries can run which data directory.

use std::ops::RangeInclusive;

/// The oldest major version Tusk runs.
pub const OLDEST_MAJOR: u32 = 15;
/// The newest major version Tusk runs.
pub const NEWEST_MAJOR: u32 = 18;
/// Major versions Tusk runs; the CRD's schema (`spec.postgres.version`,
/// `spec.upgrade.approvedVersion`) is generated from the same bounds.
pub const SUPPORTED_MAJORS: RangeInclusive<u32> = OLDEST_MAJOR..=NEWEST_MAJOR;

/// The major version assumed where none is given (the instance manager's
/// `PG_BIN_DIR` default).
pub const DEFAULT_MAJOR: u32 = 15;

/// A major version Tusk does not run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("must be between {OLDEST_MAJOR} and {NEWEST_MAJOR}")]
pub struct UnsupportedVersion;

/// `major` as a supported major version.
pub fn supported_major(major: i64) -> Result<u32, UnsupportedVersion> {
    u32::try_from(major)
        .ok()
        .filter(|m| SUPPORTED_MAJORS.contains(m))
        .ok_or(UnsupportedVersion)
}

/// Where the programs of `major` (`postgres`, `initdb`, `pg_basebackup`,
/// `pg_rewind`) live: the Debian layout of the official images.
pub fn bin_dir(major: u32) -> String {
    format!("/usr/lib/postgresql/{major}/bin")
}

/// Where `scripts/setup` installs the majors Debian does not package
/// (`<this>/<major>/bin`; 16 to 18 on Debian 12).
pub const INSTALLED_MAJORS: &str = "/opt/tusk/postgresql";

/// Where this machine keeps the programs of `major`: Debian's directory
/// ([`bin_dir`]) when it exists, else the one `scripts/setup` installs
/// (the sandbox's image mapping looks in the same order).
pub fn local_bin_dir(major: u32) -> std::path::PathBuf {
    let debian = std::path::PathBuf::from(bin_dir(major));
    if debian.is_dir() {
        debian
    } else {
        std::path::Path::new(INSTALLED_MAJORS)
            .join(major.to_string())
            .join("bin")
    }
}

/// A version that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot read a PostgreSQL version from `{0}`")]
pub struct VersionError(String);

/// A server version as `postgres --version` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    pub major: u32,
    /// The full version, e.g. `15.8`.
    pub full: String,
}

/// Parses `postgres (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)`.
pub fn parse_version_output(output: &str) -> Result<ServerVersion, VersionError> {
    let invalid = || VersionError(output.trim().to_owned());
    let full = output
        .split_whitespace()
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()))
        .ok_or_else(invalid)?;
    let major = full
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(invalid)?;
    Ok(ServerVersion {
        major,
        full: full.to_owned(),
    })
}

/// Parses a data directory's `PG_VERSION` file (its major version).
pub fn parse_pg_version_file(content: &str) -> Result<u32, VersionError> {
    content
        .trim()
        .parse()
        .map_err(|_| VersionError(content.trim().to_owned()))
}

/// Binaries of one major version run only data directories of that major
/// version; anything else needs `pg_upgrade`.
pub fn can_run(binary_major: u32, data_major: u32) -> bool {
    binary_major == data_major
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_postgres_output() {
        let cases = [
            (
                "postgres (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)\n",
                15,
                "15.8",
            ),
            ("postgres (PostgreSQL) 16.4", 16, "16.4"),
            ("postgres (PostgreSQL) 18beta1", 18, "18beta1"),
        ];
        for (output, major, full) in cases {
            let version = parse_version_output(output).expect("parses");
            assert_eq!((version.major, version.full.as_str()), (major, full));
        }
        assert!(parse_version_output("postgres (PostgreSQL)").is_err());
    }

    #[test]
    fn supported_majors_and_their_programs() {
        assert_eq!(supported_major(15), Ok(15));
        assert_eq!(supported_major(18), Ok(18));
        assert_eq!(supported_major(14), Err(UnsupportedVersion));
        assert_eq!(supported_major(19), Err(UnsupportedVersion));
        assert_eq!(supported_major(-1), Err(UnsupportedVersion));
        assert_eq!(UnsupportedVersion.to_string(), "must be between 15 and 18");
        assert_eq!(bin_dir(16), "/usr/lib/postgresql/16/bin");
        assert!(SUPPORTED_MAJORS.contains(&DEFAULT_MAJOR));
    }

    #[test]
    fn data_directories_run_only_on_their_major_version() {
        assert_eq!(parse_pg_version_file("15\n"), Ok(15));
        assert!(parse_pg_version_file("fifteen").is_err());
        assert!(can_run(15, 15));
        assert!(!can_run(16, 15));
        assert!(!can_run(15, 16));
    }
}
