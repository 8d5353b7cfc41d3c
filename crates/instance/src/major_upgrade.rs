//! Major-version upgrades of an instance's data with `pg_upgrade --link`:
//! the steps the operator's upgrade drives, each one safe to run again.
//!
//! 1. [`MajorUpgrade::prepare`]: an empty cluster of the new major beside
//!    the old one on the same volume (so `--link` can hard-link), with the
//!    old cluster's data checksums, encoding, locale and superuser, the
//!    local lines of its `pg_hba.conf` and its `pg_ident.conf`. A
//!    half-made new cluster from an earlier attempt is removed first.
//! 2. [`MajorUpgrade::check`]: `pg_upgrade --check`, which changes
//!    neither cluster; a failure names the check and what it found (the
//!    missing libraries, say), read from the report files `pg_upgrade`
//!    leaves.
//! 3. [`MajorUpgrade::link`]: `pg_upgrade --link`. Up to this step the old
//!    cluster is untouched (the rollback point); until the new cluster is
//!    first started it can still be brought back (`pg_control.old`).
//! 4. Once the new cluster runs, [`analyze`] gathers planner statistics in
//!    stages (`pg_upgrade` carries none over), so queries get usable plans
//!    within seconds.
//!
//! Both clusters must be stopped for steps 2 and 3. The temporary servers
//! `pg_upgrade` starts listen on a socket in a private directory only.
//!
//! [`precheck`] runs steps 1 and 2 on a restore of the newest backup
//! before anything is stopped (`tusk instance upgrade-check`);
//! [`volume`] runs the steps on a volume in the operator's upgrade pod
//! (`tusk instance upgrade`) and puts the new cluster in place;
//! [`statistics`] is step 4 in the instance manager that next serves the
//! data as primary.

pub mod precheck;
pub mod statistics;
pub mod volume;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tusk_postgres::upgrade::{self, Clusters, Mode};

use crate::process_user::{ProcessUser, ProcessUserError};

#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error(transparent)]
    Tool(#[from] crate::tools::ToolError),
    #[error("{step} failed: {summary}")]
    Failed { step: &'static str, summary: String },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pg_controldata of {0} shows no data checksum version")]
    UnknownChecksums(PathBuf),
    #[error(transparent)]
    User(#[from] ProcessUserError),
    #[error("cannot tell the version of the PostgreSQL programs in {0}: {1}")]
    Version(PathBuf, tusk_postgres::version::VersionError),
}

/// One upgrade of a data directory to a newer major.
#[derive(Clone, Debug)]
pub struct MajorUpgrade {
    pub old_bin: PathBuf,
    pub new_bin: PathBuf,
    pub new_major: u32,
    pub old_data: PathBuf,
    /// Beside `old_data`, on the same file system.
    pub new_data: PathBuf,
    /// Private to this upgrade: `pg_upgrade`'s working directory and its
    /// servers' socket directory.
    pub work_dir: PathBuf,
    pub superuser: String,
}

/// The files of the old cluster that say who may connect; `pg_upgrade`
/// carries over data, not configuration.
const ACCESS_FILES: [&str; 2] = [HBA_FILE, "pg_ident.conf"];
const HBA_FILE: &str = "pg_hba.conf";

impl MajorUpgrade {
    fn clusters(&self) -> Clusters<'_> {
        Clusters {
            old_bin: &self.old_bin,
            new_bin: &self.new_bin,
            old_data: &self.old_data,
            new_data: &self.new_data,
            socket_dir: &self.work_dir,
            superuser: &self.superuser,
        }
    }

    /// Step 1: a fresh, empty cluster of the new major at `new_data`.
    pub async fn prepare(&self, user: &ProcessUser) -> Result<(), UpgradeError> {
        user.private_dir(&self.work_dir)?;
        let controldata = self
            .run(
                user,
                "pg_controldata",
                &self.old_bin,
                [self.old_data.clone().into()],
            )
            .await?;
        let checksums = upgrade::checksums_enabled(&controldata)
            .ok_or_else(|| UpgradeError::UnknownChecksums(self.old_data.clone()))?;
        if self.new_data.exists() {
            std::fs::remove_dir_all(&self.new_data).map_err(|source| UpgradeError::Io {
                action: "remove the half-made cluster",
                path: self.new_data.clone(),
                source,
            })?;
        }
        let args = upgrade::initdb_args(&self.new_data, self.new_major, checksums, &self.superuser);
        self.run(user, "initdb", &self.new_bin, args).await?;
        for name in ACCESS_FILES {
            let (from, to) = (self.old_data.join(name), self.new_data.join(name));
            let io = |action, source| UpgradeError::Io {
                action,
                path: from.clone(),
                source,
            };
            let text = std::fs::read_to_string(&from).map_err(|e| io("read", e))?;
            let text = if name == HBA_FILE {
                upgrade::local_access(&text)
            } else {
                text
            };
            std::fs::write(&to, text).map_err(|e| io("write beside", e))?;
            user.give(&to)?;
        }
        Ok(())
    }

    /// Step 2: `pg_upgrade --check`.
    pub async fn check(&self, user: &ProcessUser) -> Result<(), UpgradeError> {
        let args = upgrade::pg_upgrade_args(&self.clusters(), Mode::Check);
        self.run(user, "pg_upgrade", &self.new_bin, args)
            .await
            .map(drop)
    }

    /// Step 3: `pg_upgrade --link`.
    pub async fn link(&self, user: &ProcessUser) -> Result<(), UpgradeError> {
        let args = upgrade::pg_upgrade_args(&self.clusters(), Mode::Link);
        self.run(user, "pg_upgrade", &self.new_bin, args)
            .await
            .map(drop)
    }

    /// Runs `program` of `bin_dir` as the PostgreSQL user in the work
    /// directory; a failure carries the gist of what it printed and of the
    /// report files it named.
    async fn run(
        &self,
        user: &ProcessUser,
        program: &'static str,
        bin_dir: &Path,
        args: impl IntoIterator<Item = OsString>,
    ) -> Result<String, UpgradeError> {
        run_in(user, program, bin_dir, &self.work_dir, args).await
    }
}

/// Step 4: planner statistics for every database of the new cluster,
/// served on the socket in `socket_dir` at `port`, in stages (a rough
/// pass first, so plans are usable within seconds).
pub async fn analyze(
    user: &ProcessUser,
    bin_dir: &Path,
    socket_dir: &Path,
    port: u16,
    superuser: &str,
) -> Result<(), UpgradeError> {
    let args: Vec<OsString> = vec![
        "--all".into(),
        "--analyze-in-stages".into(),
        "--host".into(),
        socket_dir.into(),
        "--port".into(),
        port.to_string().into(),
        "--username".into(),
        superuser.into(),
    ];
    run_in(user, "vacuumdb", bin_dir, socket_dir, args)
        .await
        .map(drop)
}

/// The major version of the PostgreSQL programs in `bin_dir`, as
/// `postgres --version` prints it.
pub async fn installed_major(user: &ProcessUser, bin_dir: &Path) -> Result<u32, UpgradeError> {
    let mut command = user.command(&bin_dir.join("postgres"));
    command.arg("--version");
    let (text, _) = crate::tools::output("postgres", &mut command).await?;
    tusk_postgres::version::parse_version_output(&text)
        .map(|version| version.major)
        .map_err(|error| UpgradeError::Version(bin_dir.to_owned(), error))
}

/// How many lines of each file `pg_upgrade` names go into a failure.
const REPORT_LINES: usize = 20;

async fn run_in(
    user: &ProcessUser,
    program: &'static str,
    bin_dir: &Path,
    work_dir: &Path,
    args: impl IntoIterator<Item = OsString>,
) -> Result<String, UpgradeError> {
    let mut command = user.command(&bin_dir.join(program));
    command.args(args).current_dir(work_dir);
    let (text, status) = crate::tools::output(program, &mut command).await?;
    if status.success() {
        return Ok(text);
    }
    let (mut summary, files) = upgrade::failure_summary(&text);
    for file in files {
        if let Ok(report) = std::fs::read_to_string(&file) {
            // A report's findings come first; a log's cause where the
            // first error is, or else last.
            let lines: Vec<&str> = if file.ends_with(".log") {
                upgrade::log_gist(&report, REPORT_LINES)
            } else {
                report.lines().map(str::trim).take(REPORT_LINES).collect()
            };
            summary.push_str(&format!(" [{}]", lines.join(" ")));
        }
    }
    if summary.is_empty() {
        summary = format!("exited with {status}");
    }
    Err(UpgradeError::Failed {
        step: program,
        summary,
    })
}
