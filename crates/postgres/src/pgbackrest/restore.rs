//! Restores: where to recover to, the arguments of `pgbackrest restore`,
//! and the settings it leaves behind.

use super::Repository;

/// Where a restore recovers to, after which the restored instance is
/// promoted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryTarget {
    /// The end of the archived WAL.
    Latest,
    /// A moment (RFC 3339): transactions committed up to it are kept.
    Time(String),
    /// A WAL position.
    Lsn(String),
    /// A restore point created with `pg_create_restore_point`.
    Name(String),
}

impl std::fmt::Display for RecoveryTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoveryTarget::Latest => f.write_str("the end of the archived WAL"),
            RecoveryTarget::Time(time) => write!(f, "time {time}"),
            RecoveryTarget::Lsn(lsn) => write!(f, "LSN {lsn}"),
            RecoveryTarget::Name(name) => write!(f, "restore point {name}"),
        }
    }
}

/// A restore's source: another cluster's repository, and where to
/// recover to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreSource {
    pub repository: Repository,
    /// The source cluster's namespace and name: its path in the
    /// repository, and its stanza.
    pub namespace: String,
    pub cluster: String,
    pub target: RecoveryTarget,
}

/// The arguments of `pgbackrest restore` into `pgdata`, recovering to
/// `target` and promoting there. pgBackRest picks the newest backup that
/// ends before the target, and writes `restore_command` and the target to
/// `postgresql.auto.conf` ([`RECOVERY_SETTINGS`]).
pub fn restore_args(pgdata: &str, target: &RecoveryTarget) -> Vec<String> {
    let mut args = vec!["restore".to_owned(), format!("--pg1-path={pgdata}")];
    let (kind, value) = match target {
        RecoveryTarget::Latest => return args,
        RecoveryTarget::Time(time) => ("time", postgres_time(time)),
        RecoveryTarget::Lsn(lsn) => ("lsn", lsn.clone()),
        RecoveryTarget::Name(name) => ("name", name.clone()),
    };
    args.extend([
        format!("--type={kind}"),
        format!("--target={value}"),
        "--target-action=promote".to_owned(),
    ]);
    args
}

/// An RFC 3339 time as pgBackRest reads a target (it selects the backup
/// by it) and PostgreSQL reads `recovery_target_time`: in UTC,
/// `YYYY-MM-DD HH:MM:SS.ffffff+00`. Text that is not RFC 3339 is passed on
/// as it is (admission accepts only RFC 3339).
fn postgres_time(time: &str) -> String {
    match time.parse::<jiff::Timestamp>() {
        Ok(at) => at.strftime("%Y-%m-%d %H:%M:%S%.6f+00").to_string(),
        Err(_) => time.to_owned(),
    }
}

/// The settings a restore writes to `postgresql.auto.conf`, reset once
/// the restored instance is promoted (they name the source repository).
pub const RECOVERY_SETTINGS: &[&str] = &[
    "restore_command",
    "recovery_target",
    "recovery_target_time",
    "recovery_target_lsn",
    "recovery_target_name",
    "recovery_target_xid",
    "recovery_target_action",
    "recovery_target_inclusive",
    "recovery_target_timeline",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_recovers_to_its_target_and_promotes_there() {
        assert_eq!(
            restore_args("/d", &RecoveryTarget::Latest),
            ["restore", "--pg1-path=/d"]
        );
        assert_eq!(
            restore_args("/d", &RecoveryTarget::Time("2026-12-04T18:00:00Z".into())),
            [
                "restore",
                "--pg1-path=/d",
                "--type=time",
                "--target=2026-12-04 18:00:00.000000+00",
                "--target-action=promote"
            ]
        );
        assert_eq!(
            restore_args("/d", &RecoveryTarget::Lsn("0/3000060".into()))[2],
            "--type=lsn"
        );
        // Any offset, in UTC.
        assert_eq!(
            restore_args(
                "/d",
                &RecoveryTarget::Time("2026-12-04T20:15:12.427134+02:00".into())
            )[3],
            "--target=2026-12-04 18:15:12.427134+00"
        );
    }
}
