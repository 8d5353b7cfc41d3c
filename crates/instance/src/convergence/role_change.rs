//! Role changes of the convergence loop: a standby promoted, a former
//! primary demoted and rejoined under the new one, a stalled standby
//! rejoined.

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;
use tusk_api::instance::InstancePhase;

use super::{ConvergenceError, Manager, STALL_LIMIT, WAL_RECEIVER_WAIT};
use crate::desired::{DesiredState, DesiredStateSource};
use crate::postgres::config::ReplicationRole;
use crate::primacy::Intent;
use crate::report;
use crate::rewind::{self, RewindError};
use crate::sql::{self, SqlError};
use crate::supervisor::Postmaster;

impl<S: DesiredStateSource> Manager<S> {
    /// Promotes this standby and renders its configuration as primary.
    pub(super) async fn promote(&mut self, desired: &DesiredState) -> Result<(), ConvergenceError> {
        if self.postmaster.is_none() {
            return Ok(());
        }
        self.state.set_phase(InstancePhase::Promoting);
        let client = sql::wait_ready(&self.ctx.local_target(), Duration::from_secs(60)).await?;
        let waited = Instant::now();
        if sql::wait_wal_receiver_stopped(&client, WAL_RECEIVER_WAIT).await? {
            tracing::info!(
                seconds = waited.elapsed().as_secs_f64(),
                "WAL receiver stopped; promoting"
            );
        } else {
            tracing::warn!(
                seconds = WAL_RECEIVER_WAIT.as_secs(),
                "the former primary still streams WAL; promoting as the operator decided"
            );
        }
        if !self.primacy.held() {
            // Lost while waiting: promote only under a held lease.
            self.state.set_phase(InstancePhase::WaitingForLease);
            return Ok(());
        }
        // Guarded as a primary from the request on: should the lease lapse
        // while PostgreSQL promotes (or the whole pod be frozen and thawed
        // after another took over), the lease task and the watchdog fence
        // it, rather than take it for a standby.
        self.state.lock().primary_pid = self.postmaster.as_ref().map(Postmaster::pid);
        let started = Instant::now();
        let promoted: bool = client
            .query_one("SELECT pg_promote(true, 60)", &[])
            .await
            .map_err(SqlError::from)?
            .try_get(0)
            .map_err(SqlError::from)?;
        if !promoted {
            return Err(ConvergenceError::PromotionTimedOut);
        }
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            "promoted to primary"
        );
        // Until a checkpoint records the new timeline in pg_control,
        // pg_rewind against this server sees the old timeline and decides
        // that the former primary needs no rewind.
        client
            .batch_execute("CHECKPOINT")
            .await
            .map_err(SqlError::from)?;
        let pgdata = self.ctx.settings.pgdata.clone();
        self.reload_pending |= self
            .ctx
            .write_config(&pgdata, desired, ReplicationRole::Primary)?;
        if self.reload_pending {
            self.reload(desired.restart_for_pending).await?;
        }
        self.state.set_phase(InstancePhase::Running);
        Ok(())
    }

    /// A former primary: stop at once (no more writes here), then, once the
    /// new primary has finished its promotion, rewind and follow it.
    pub(super) async fn demote(
        &mut self,
        desired: &DesiredState,
        address: Option<IpAddr>,
    ) -> Result<(), ConvergenceError> {
        self.state.set_phase(InstancePhase::Rejoining);
        self.stop_postgres().await;
        self.primacy.want(Intent::release(desired.lease_timing));
        let Some(address) = address else {
            return Ok(());
        };
        if !self.is_writable_primary(address).await {
            if self.awaited_primary != Some(address) {
                tracing::info!(%address, "waiting for the new primary to finish its promotion");
                self.awaited_primary = Some(address);
            }
            return Ok(());
        }
        self.awaited_primary = None;
        let started = Instant::now();
        let method = rewind::rejoin(&self.ctx, desired, address).await?;
        tracing::info!(
            ?method,
            seconds = started.elapsed().as_secs_f64(),
            "rejoined as a standby of the new primary"
        );
        let role = self.standby_role(desired, address);
        self.ensure_running(desired, Some(role)).await
    }

    /// A standby of the primary at `address` (unknown: `None`): streaming
    /// from it while it holds a live lease, detached otherwise; a standby
    /// that streams is watched for stalls.
    pub(super) async fn run_standby(
        &mut self,
        desired: &DesiredState,
        address: Option<IpAddr>,
    ) -> Result<(), ConvergenceError> {
        let role = match address {
            Some(address) => Some(self.standby_role(desired, address)),
            // The primary's address is unknown: keep streaming as
            // configured, unless the lease says no one may be followed.
            None => (!self.may_stream(desired)).then_some(ReplicationRole::Detached),
        };
        self.ensure_running(desired, role.clone()).await?;
        match (address, role) {
            (Some(address), Some(ReplicationRole::Standby(_))) => {
                self.rejoin_if_stalled(desired, address).await
            }
            _ => {
                // Not streaming by choice: not stalled.
                self.stalled_since = None;
                self.streaming_ticks = 0;
                Ok(())
            }
        }
    }

    /// A standby that answers but has not streamed for [`STALL_LIMIT`] while
    /// its primary is writable cannot follow that primary: it needs WAL
    /// the primary no longer keeps (only a fresh clone helps), or it
    /// replayed WAL from a former primary past the point where the new
    /// one's timeline forked (a rewind fixes it). A standby still stalled
    /// after a rewind keeps its data and reports it.
    pub(super) async fn rejoin_if_stalled(
        &mut self,
        desired: &DesiredState,
        address: IpAddr,
    ) -> Result<(), ConvergenceError> {
        let observation = match &self.postmaster {
            Some(_) => report::observe_local(&self.ctx).await,
            None => None,
        };
        // Not running or not answering yet (still recovering): not stalled.
        let streaming = observation.as_ref().is_none_or(|o| o.streaming);
        // A failing WAL receiver shows `streaming` for an instant at each
        // retry; only streaming seen on consecutive ticks counts.
        if streaming {
            self.streaming_ticks += 1;
            if self.streaming_ticks >= 2 {
                self.stalled_since = None;
                self.stall_rejoins = 0;
            }
            return Ok(());
        }
        self.streaming_ticks = 0;
        let since = *self.stalled_since.get_or_insert_with(Instant::now);
        if since.elapsed() < STALL_LIMIT || !self.is_writable_primary(address).await {
            return Ok(());
        }
        let needed = observation.and_then(|o| o.replayed_lsn.or(o.received_lsn));
        let wal_gone = match needed {
            Some(lsn) => rewind::primary_lacks_wal(&self.ctx, address, &lsn.to_string()).await?,
            None => false,
        };
        if !wal_gone && self.stall_rejoins > 0 {
            return Err(RewindError::StillStalled.into());
        }
        tracing::warn!(
            %address,
            seconds = since.elapsed().as_secs(),
            wal_gone,
            "standby cannot stream from its primary; rejoining it"
        );
        self.stalled_since = None;
        self.state.set_phase(InstancePhase::Rejoining);
        self.stop_postgres().await;
        let method = if wal_gone {
            rewind::reclone(&self.ctx, desired, address).await?
        } else {
            rewind::rejoin(&self.ctx, desired, address).await?
        };
        self.stall_rejoins += 1;
        tracing::info!(?method, "stalled standby rejoined its primary");
        let role = self.standby_role(desired, address);
        self.ensure_running(desired, Some(role)).await
    }

    /// True when the server at `address` accepts connections and is not in
    /// recovery.
    async fn is_writable_primary(&self, address: IpAddr) -> bool {
        let Ok(client) = self.ctx.connect_remote(address).await else {
            return false;
        };
        match client.query_one("SELECT pg_is_in_recovery()", &[]).await {
            Ok(row) => row
                .try_get::<_, bool>(0)
                .is_ok_and(|in_recovery| !in_recovery),
            Err(_) => false,
        }
    }
}
