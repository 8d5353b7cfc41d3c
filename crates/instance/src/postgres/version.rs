//! PostgreSQL version rules: which binaries can run which data directory.

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
    fn data_directories_run_only_on_their_major_version() {
        assert_eq!(parse_pg_version_file("15\n"), Ok(15));
        assert!(parse_pg_version_file("fifteen").is_err());
        assert!(can_run(15, 15));
        assert!(!can_run(16, 15));
        assert!(!can_run(15, 16));
    }
}
