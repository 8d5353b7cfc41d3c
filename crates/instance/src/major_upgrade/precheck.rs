//! `tusk instance upgrade-check`: `pg_upgrade` before a major upgrade
//! stops anything, on a copy of the cluster restored from its
//! newest backup in the operator's pre-check pod (`tusk_api::upgrade`).
//!
//! `pg_upgrade` reaches a running old server only through its unix
//! socket, so it cannot check the primary from another pod; and the
//! primary's volume is its own while it serves. The pre-check therefore
//! works on a scratch volume, with the upgrade pod's programs (the new
//! major's image, the old major's installation copied beside):
//!
//! 1. the newest backup is restored with pgBackRest, as the restore
//!    rehearsal does ([`crate::rehearsal::restore_newest`]);
//! 2. the old major replays the archived WAL on its unix socket only (no
//!    network; archiving off, here and in the copy's configuration, so
//!    neither this server nor the ones `pg_upgrade` starts ever write to
//!    the repository), promotes at its end, and is stopped cleanly
//!    (`pg_upgrade` refuses a cluster shut down in recovery);
//! 3. an empty cluster of the new major is made beside it and
//!    `pg_upgrade --check` runs ([`MajorUpgrade::prepare`] and
//!    [`MajorUpgrade::check`]);
//! 4. the copy is upgraded for real, `pg_upgrade --link`
//!    ([`MajorUpgrade::link`]): `--check` does not restore the schema, so
//!    what only that restore finds (a view on a catalog column the new
//!    major removed, an object the new major's server refuses) fails
//!    here, on a copy, rather than after every instance stopped.
//!
//! Both copies are removed at the end. The outcome names the step that
//! failed (`restore`, `prepare`, `check` or `link`) and what it found.

use std::path::PathBuf;
use std::time::Instant;

use tusk_api::upgrade::{Outcome, Step, new_data_dir};

use super::MajorUpgrade;
use crate::bootstrap::{start_private, wait_promoted};
use crate::context::InstanceContext;
use crate::datadir;
use crate::desired::DesiredState;
use crate::postgres::config::ReplicationRole;

/// The step that failed, and why.
type Failure = (Step, String);

/// The pre-check of an upgrade to `new_major`.
#[derive(Clone, Debug)]
pub struct PreCheck {
    /// The old major's programs.
    pub old_bin: PathBuf,
    /// The new major's programs.
    pub new_bin: PathBuf,
    pub new_major: u32,
    /// Private to the check: `pg_upgrade`'s working directory and its
    /// servers' socket directory.
    pub work_dir: PathBuf,
}

impl PreCheck {
    /// Restores the newest backup and upgrades it (`pg_upgrade --check`,
    /// then `--link`) with `ctx`'s settings (its `bin_dir` is replaced by
    /// the old major's for the restore). Never fails: the outcome names
    /// the step that did.
    pub async fn run(&self, ctx: &InstanceContext, desired: &DesiredState) -> Outcome {
        let started = Instant::now();
        let mut old = ctx.clone();
        old.settings.bin_dir.clone_from(&self.old_bin);
        let mut from_version = None;
        let result = self
            .restore_and_check(&old, desired, &mut from_version)
            .await;
        let staging = old.settings.staging_dir();
        for dir in [staging, self.new_data(&old)] {
            if let Err(error) = datadir::remove_dir(&dir) {
                tracing::warn!(%error, dir = %dir.display(), "cannot remove the pre-check's copy");
            }
        }
        let (failed_step, message) = match result {
            Ok(done) => (None, done),
            Err((step, why)) => (Some(step), why),
        };
        Outcome {
            from_version,
            data_version: None,
            failed_step,
            message,
            duration_seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// Where the empty cluster of the new major is made: beside the
    /// restored copy, on the scratch volume.
    fn new_data(&self, ctx: &InstanceContext) -> PathBuf {
        let name = std::path::Path::new(&new_data_dir(self.new_major))
            .file_name()
            .map(ToOwned::to_owned)
            .unwrap_or_default();
        ctx.settings.pgdata.with_file_name(name)
    }

    async fn restore_and_check(
        &self,
        old: &InstanceContext,
        desired: &DesiredState,
        from_version: &mut Option<u32>,
    ) -> Result<String, Failure> {
        let restore = |what: &str, why: String| (Step::Restore, format!("{what}: {why}"));
        let mut backup = None;
        let (staging, _) = crate::rehearsal::restore_newest(old, desired, &mut backup)
            .await
            .map_err(|(check, why)| restore(check.as_str(), why))?;
        let label = backup.map(|b| b.label).unwrap_or_default();
        *from_version = datadir::data_major_version(&staging).ok();
        // The copy never archives, whoever starts it.
        let private = DesiredState {
            archiving: None,
            ..desired.clone()
        };
        old.write_config(&staging, &private, ReplicationRole::Primary)
            .map_err(|e| restore("configuration", e.to_string()))?;
        let postmaster = start_private(old, &staging, &old.pgbackrest_env())
            .map_err(|e| restore("recovery", e.to_string()))?;
        let promoted = wait_promoted(old, postmaster.pid()).await.map(drop);
        postmaster.stop(old.settings.stop_timeout).await;
        promoted.map_err(|why| restore("recovery", why))?;
        let engine = MajorUpgrade {
            old_bin: self.old_bin.clone(),
            new_bin: self.new_bin.clone(),
            new_major: self.new_major,
            old_data: staging,
            new_data: self.new_data(old),
            work_dir: self.work_dir.clone(),
            superuser: old.settings.credentials.superuser.username.clone(),
        };
        let at = |step: Step| move |error: super::UpgradeError| (step, error.to_string());
        engine.prepare(&old.user).await.map_err(at(Step::Prepare))?;
        engine.check(&old.user).await.map_err(at(Step::Check))?;
        engine.link(&old.user).await.map_err(at(Step::Link))?;
        Ok(format!(
            "pg_upgrade to PostgreSQL {} (--check, then --link) passed on a restore of backup {label}",
            self.new_major
        ))
    }
}
