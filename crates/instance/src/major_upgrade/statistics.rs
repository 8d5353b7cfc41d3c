//! Step 4 of a major upgrade, in the instance manager: `pg_upgrade`
//! carries no planner statistics over, so the manager that next serves
//! the upgraded data as primary gathers them ([`super::analyze`], in
//! stages) beside its loop, then removes the marker the upgrade left on
//! the volume ([`super::volume::analyze_marker`]). A failure leaves the
//! marker: the manager's next start tries again.

use std::time::Duration;

use tokio::task::JoinHandle;

use super::volume::analyze_marker;
use crate::context::InstanceContext;
use crate::task::take_finished;

/// The longest gathering the statistics may take.
const ANALYZE_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// The statistics being gathered, if any.
#[derive(Default)]
pub struct StatisticsAfterUpgrade {
    running: Option<((), JoinHandle<Result<(), String>>)>,
    /// True once this manager looked for the marker: once a start is
    /// enough, only the upgrade pod writes it, while no instance runs.
    looked: bool,
}

impl StatisticsAfterUpgrade {
    /// One look, from the convergence loop: once this instance runs as
    /// primary, starts gathering the statistics if the volume asks for
    /// them; reports the outcome once finished. Never waits.
    pub fn converge(&mut self, ctx: &InstanceContext, running_primary: bool) {
        if let Some(((), outcome)) = take_finished(&mut self.running, "statistics") {
            match outcome.and_then(|gathered| gathered) {
                Ok(()) => tracing::info!("planner statistics gathered after the major upgrade"),
                Err(error) => tracing::warn!(
                    %error,
                    "cannot gather planner statistics after the major upgrade; the next start of the manager tries again"
                ),
            }
        }
        if self.looked || !running_primary {
            return;
        }
        self.looked = true;
        if !analyze_marker(&ctx.settings.pgdata).exists() {
            return;
        }
        tracing::info!(
            "the data was upgraded to a new major: gathering planner statistics in stages"
        );
        let ctx = ctx.clone();
        self.running = Some(((), tokio::spawn(async move { gather(&ctx).await })));
    }
}

/// Gathers the statistics of every database over the local socket, then
/// removes the marker.
async fn gather(ctx: &InstanceContext) -> Result<(), String> {
    let settings = &ctx.settings;
    let analyze = super::analyze(
        &ctx.user,
        &settings.bin_dir,
        &settings.run_dir,
        settings.postgres_port,
        &settings.credentials.superuser.username,
    );
    match tokio::time::timeout(ANALYZE_TIMEOUT, analyze).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(error.to_string()),
        Err(_) => {
            return Err(format!(
                "vacuumdb did not finish within {ANALYZE_TIMEOUT:?}"
            ));
        }
    }
    let marker = analyze_marker(&settings.pgdata);
    match std::fs::remove_file(&marker) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {error}", marker.display()))
        }
        _ => Ok(()),
    }
}
