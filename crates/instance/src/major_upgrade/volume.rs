//! `tusk instance upgrade`: a volume's data upgraded to a newer major in
//! the operator's upgrade pod (`tusk_api::upgrade`), by the steps of
//! [`MajorUpgrade`] and a swap of the directories.
//!
//! Every run starts from what the volume holds, so a pod interrupted
//! anywhere is simply run again:
//!
//! - the data already of the new major: upgraded (the swap is finished
//!   if the old cluster is still aside);
//! - no data but the old cluster aside and the new one beside: the swap
//!   was cut short and is finished;
//! - the data of the old major: upgraded from the start. A `--link` cut
//!   short left the old cluster's `pg_control` renamed (and the new
//!   cluster never ran, so the old one is otherwise as it was): it is
//!   renamed back first.
//!
//! The contract's paths are the pod's; here every path is taken beside
//! the data directory, under the contract's names, wherever the volume is
//! mounted.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tusk_api::upgrade::{ANALYZE_MARKER, Outcome, Step, new_data_dir};

use super::{MajorUpgrade, UpgradeError};
use crate::datadir;
use crate::process_user::ProcessUser;

/// The step that failed, and why.
type Failure = (Step, String);

/// The upgrade of the data directory `pgdata` to `new_major`.
#[derive(Clone, Debug)]
pub struct VolumeUpgrade {
    pub pgdata: PathBuf,
    /// The old major's programs.
    pub old_bin: PathBuf,
    /// The new major's programs.
    pub new_bin: PathBuf,
    pub new_major: u32,
    pub superuser: String,
    /// Private to this upgrade: `pg_upgrade`'s working directory and its
    /// servers' socket directory (short: a socket path is at most 107
    /// bytes).
    pub work_dir: PathBuf,
}

/// What an earlier run left on the volume.
enum Found {
    /// The data is of the new major; the old cluster may still be aside.
    Upgraded,
    /// The old cluster (of major `old`) is aside and the new one beside.
    SwapCutShort { aside: PathBuf, old: u32 },
    /// The data is of the old major `0`.
    Old(u32),
}

/// The marker an upgraded volume carries until the instance manager has
/// gathered planner statistics ([`ANALYZE_MARKER`]), beside `pgdata`.
pub fn analyze_marker(pgdata: &Path) -> PathBuf {
    beside(pgdata, ANALYZE_MARKER)
}

/// The file or directory the contract's `path` names, beside `pgdata`.
fn beside(pgdata: &Path, path: &str) -> PathBuf {
    pgdata.with_file_name(Path::new(path).file_name().unwrap_or_default())
}

impl VolumeUpgrade {
    /// Where the new cluster is made ([`new_data_dir`]).
    pub fn new_data(&self) -> PathBuf {
        beside(&self.pgdata, &new_data_dir(self.new_major))
    }

    /// Where the old cluster of major `old` is moved aside during the swap.
    pub fn aside(&self, old: u32) -> PathBuf {
        self.pgdata
            .with_file_name(format!("{}-{old}", self.aside_prefix()))
    }

    fn aside_prefix(&self) -> String {
        let name = self.pgdata.file_name().unwrap_or_default();
        format!("{}-old", name.to_string_lossy())
    }

    /// The old cluster moved aside by an earlier run, and its major.
    fn find_aside(&self) -> Option<(PathBuf, u32)> {
        let prefix = format!("{}-", self.aside_prefix());
        let entries = std::fs::read_dir(self.pgdata.parent()?).ok()?;
        entries.flatten().find_map(|entry| {
            let name = entry.file_name();
            let old = name.to_str()?.strip_prefix(&prefix)?.parse().ok()?;
            Some((entry.path(), old))
        })
    }

    /// The engine's steps on this volume.
    pub fn engine(&self) -> MajorUpgrade {
        MajorUpgrade {
            old_bin: self.old_bin.clone(),
            new_bin: self.new_bin.clone(),
            new_major: self.new_major,
            old_data: self.pgdata.clone(),
            new_data: self.new_data(),
            work_dir: self.work_dir.clone(),
            superuser: self.superuser.clone(),
        }
    }

    /// Upgrades the data, or finishes what an earlier run started. Never
    /// fails: the outcome names the step that did, and why.
    pub async fn run(&self, user: &ProcessUser) -> Outcome {
        let started = Instant::now();
        let from_version = self.major_before();
        let result = self.upgrade(user).await;
        let (failed_step, message) = match result {
            Ok(done) => (None, done),
            Err((step, why)) => (Some(step), why),
        };
        Outcome {
            from_version,
            data_version: datadir::data_major_version(&self.pgdata).ok(),
            failed_step,
            message,
            duration_seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// The major the data had before the upgrade: the data's own, or the
    /// old cluster's aside once the data is (being) swapped.
    fn major_before(&self) -> Option<u32> {
        match datadir::data_major_version(&self.pgdata) {
            Ok(major) if major != self.new_major => Some(major),
            data => self.find_aside().map(|(_, old)| old).or(data.ok()),
        }
    }

    async fn upgrade(&self, user: &ProcessUser) -> Result<String, Failure> {
        let new = self.new_major;
        match self.found()? {
            Found::Upgraded => {
                if let Some((aside, _)) = self.find_aside() {
                    self.finish(user, &aside)?;
                    return Ok(format!(
                        "the data was upgraded to PostgreSQL {new}; the old cluster is removed"
                    ));
                }
                Ok(format!("the data is PostgreSQL {new} already"))
            }
            Found::SwapCutShort { aside, old } => {
                self.move_in(user, &aside)?;
                Ok(format!(
                    "upgraded from PostgreSQL {old} to {new}: the new cluster is moved into place"
                ))
            }
            Found::Old(old) => self.upgrade_from(user, old).await,
        }
    }

    fn found(&self) -> Result<Found, Failure> {
        let refuse = |why: String| (Step::Prepare, why);
        if !self.pgdata.exists() {
            return match self.find_aside() {
                Some((aside, old)) if self.new_data().is_dir() => {
                    Ok(Found::SwapCutShort { aside, old })
                }
                _ => Err(refuse(format!(
                    "{} holds no data directory",
                    self.pgdata.display()
                ))),
            };
        }
        let major = datadir::data_major_version(&self.pgdata).map_err(|e| refuse(e.to_string()))?;
        match major.cmp(&self.new_major) {
            std::cmp::Ordering::Equal => Ok(Found::Upgraded),
            std::cmp::Ordering::Less => Ok(Found::Old(major)),
            std::cmp::Ordering::Greater => Err(refuse(format!(
                "the data is PostgreSQL {major}, newer than {}: a major version is never downgraded",
                self.new_major
            ))),
        }
    }

    async fn upgrade_from(&self, user: &ProcessUser, old: u32) -> Result<String, Failure> {
        let started = Instant::now();
        let aside = self.aside(old);
        if aside.exists() {
            return Err((
                Step::Prepare,
                format!(
                    "{} is in the way of the swap; it is no copy this upgrade made",
                    aside.display()
                ),
            ));
        }
        bring_back_old_cluster(&self.pgdata).map_err(|e| (Step::Prepare, e))?;
        let engine = self.engine();
        let at = |step: Step| move |error: UpgradeError| (step, error.to_string());
        engine.prepare(user).await.map_err(at(Step::Prepare))?;
        engine.check(user).await.map_err(at(Step::Check))?;
        if let Err(error) = engine.link(user).await {
            let mut why = error.to_string();
            if let Err(undo) = bring_back_old_cluster(&self.pgdata) {
                why.push_str(&format!(
                    "; and the old cluster is not brought back: {undo}"
                ));
            }
            return Err((Step::Link, why));
        }
        std::fs::rename(&self.pgdata, &aside).map_err(swap_failed("move aside", &self.pgdata))?;
        self.move_in(user, &aside)?;
        Ok(format!(
            "upgraded from PostgreSQL {old} to {} with pg_upgrade --link in {:.0} s",
            self.new_major,
            started.elapsed().as_secs_f64()
        ))
    }

    /// The second half of the swap: the new cluster into place.
    fn move_in(&self, user: &ProcessUser, aside: &Path) -> Result<(), Failure> {
        let new_data = self.new_data();
        std::fs::rename(&new_data, &self.pgdata).map_err(swap_failed("move in", &new_data))?;
        self.finish(user, aside)
    }

    /// The new cluster is in place: the marker asks for statistics, and
    /// the old cluster (whose files the new one holds by hard link) goes.
    fn finish(&self, user: &ProcessUser, aside: &Path) -> Result<(), Failure> {
        let marker = analyze_marker(&self.pgdata);
        user.private_file(
            &marker,
            "planner statistics are gathered once the primary runs\n",
        )
        .map_err(|e| (Step::Swap, e.to_string()))?;
        if let Some(volume) = self.pgdata.parent() {
            // The renames last before anything is removed.
            let synced = std::fs::File::open(volume).and_then(|dir| dir.sync_all());
            synced.map_err(swap_failed("sync", volume))?;
        }
        datadir::remove_dir(aside).map_err(|e| (Step::Swap, e.to_string()))
    }
}

fn swap_failed(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Failure {
    let path = path.display().to_string();
    move |error| (Step::Swap, format!("cannot {action} {path}: {error}"))
}

/// Renames the old cluster's `global/pg_control.old` back, where a
/// `pg_upgrade --link` that did not finish left it; nothing else of the
/// old cluster was changed while the new one never ran.
fn bring_back_old_cluster(pgdata: &Path) -> Result<(), String> {
    let global = pgdata.join("global");
    let (control, renamed) = (global.join("pg_control"), global.join("pg_control.old"));
    if control.exists() || !renamed.exists() {
        return Ok(());
    }
    tracing::info!(data = %pgdata.display(), "an interrupted pg_upgrade --link left pg_control renamed; renaming it back");
    std::fs::rename(&renamed, &control)
        .map_err(|e| format!("cannot rename {} back: {e}", renamed.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upgrade_works_beside_the_data_directory_wherever_the_volume_is_mounted() {
        let root = tempfile::tempdir().expect("temporary directory");
        let upgrade = VolumeUpgrade {
            pgdata: root.path().join("pgdata"),
            old_bin: "/old/bin".into(),
            new_bin: "/new/bin".into(),
            new_major: 16,
            superuser: "postgres".into(),
            work_dir: root.path().join("work"),
        };
        assert_eq!(upgrade.new_data(), root.path().join("pgdata-upgrade-16"));
        assert_eq!(
            analyze_marker(&upgrade.pgdata),
            root.path().join("analyze-after-upgrade")
        );
        assert_eq!(upgrade.find_aside(), None);
        std::fs::create_dir(root.path().join("pgdata-old-15")).expect("aside");
        assert_eq!(upgrade.find_aside(), Some((upgrade.aside(15), 15)));
        assert_eq!(upgrade.major_before(), Some(15), "read from the name aside");
    }
}
