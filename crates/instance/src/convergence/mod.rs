//! The convergence loop: turns the desired state into a running PostgreSQL
//! of the right role, one step at a time, and supervises it.
//!
//! Each step looks at the desired state and at the data directory, and does
//! the one thing that brings them closer: bootstrap, start, reload, restart,
//! promote, stop and rejoin, or stop because fenced. A failed step is
//! recorded and retried on the next tick. The role changes (promote,
//! demote and rejoin) are in [`role_change`]; rotated passwords are taken
//! from the mounted Secrets in [`rotation`].

mod role_change;
mod rotation;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;
use tusk_api::instance::InstancePhase;

use crate::archiving::StanzaCreation;
use crate::backup::{Backups, Serving};
use crate::backup_server::BackupServer;
use crate::bootstrap::{self, BootstrapError};
use crate::context::InstanceContext;
use crate::datadir::{self, DataDirError};
use crate::declared_roles::DeclaredRoles;
use crate::desired::{DesiredState, DesiredStateSource};
use crate::major_upgrade::statistics::StatisticsAfterUpgrade;
use crate::passwords;
use crate::plan::{Action, LocalState, plan};
use crate::postgres::config::ReplicationRole;
use crate::postgres::version::{self, VersionError};
use crate::primacy::{Intent, Primacy};
use crate::rewind::RewindError;
use crate::sql::{self, SqlError};
use crate::state::SharedState;
use crate::supervisor::{Backoff, Postmaster, SupervisorError, exited};

#[derive(Debug, thiserror::Error)]
pub enum ConvergenceError {
    #[error("bootstrap failed: {0}")]
    Bootstrap(#[from] BootstrapError),
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Supervisor(#[from] SupervisorError),
    #[error(transparent)]
    Sql(#[from] SqlError),
    #[error("rejoining the new primary failed: {0}")]
    Rewind(#[from] RewindError),
    #[error("promotion did not finish in time")]
    PromotionTimedOut,
    #[error("cannot read the PostgreSQL version: {0}")]
    Version(#[from] VersionError),
    #[error("cannot run postgres --version: {0}")]
    VersionCommand(std::io::Error),
    #[error(
        "the data directory holds PostgreSQL {data} but the binaries are PostgreSQL {binary}; a major-version upgrade is needed"
    )]
    VersionMismatch { data: u32, binary: u32 },
}

/// How long a crashed PostgreSQL must have run before its restart delay
/// starts over from the shortest.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// How long a hot standby may stay connected-to but not streaming from a
/// writable primary before it is taken for diverged (it replayed WAL the
/// new primary never had) and rewound.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// How long a promotion waits for the WAL receiver to stop, so the former
/// primary's last WAL (all of it, after a clean shutdown in a switchover)
/// is in before the new timeline starts. A frozen primary's connection
/// ends after `wal_receiver_timeout` (5 s by default here); past this bound
/// the promotion goes ahead, since the operator has already chosen.
const WAL_RECEIVER_WAIT: Duration = Duration::from_secs(10);
/// How often the loop looks again without being woken.
const TICK: Duration = Duration::from_secs(1);

/// The instance manager's convergence loop.
pub struct Manager<S> {
    ctx: InstanceContext,
    source: S,
    state: SharedState,
    /// The primary lease: PostgreSQL runs as primary only while it is held.
    primacy: Primacy,
    postmaster: Option<Postmaster>,
    backoff: Backoff,
    restart_not_before: Option<Instant>,
    started_at: Option<Instant>,
    /// Since when a running standby has not been streaming.
    stalled_since: Option<Instant>,
    /// Rejoins of a stalled standby since it last streamed.
    stall_rejoins: u32,
    /// Consecutive ticks a standby was seen streaming.
    streaming_ticks: u32,
    /// True once this manager set the passwords on its primary.
    passwords_converged: bool,
    /// The configuration files changed and PostgreSQL has not reloaded them.
    reload_pending: bool,
    /// The new primary a former primary waits for (logged once).
    awaited_primary: Option<IpAddr>,
    /// The pgBackRest stanza, created by the primary.
    stanza: StanzaCreation,
    /// The base backup the operator assigned to this instance.
    backups: Backups,
    /// pgBackRest's TLS server, through which a standby backs up.
    backup_server: BackupServer,
    /// Planner statistics, gathered once after a major upgrade.
    statistics: StatisticsAfterUpgrade,
    /// Why the mounted credentials cannot be followed (logged once).
    credentials_problem: Option<String>,
    /// The last reason the mounted certificates could not be followed
    /// (logged once).
    certificates_problem: Option<String>,
    /// The declared roles (`spec.roles`), kept by the primary.
    declared_roles: DeclaredRoles,
}

impl<S: DesiredStateSource> Manager<S> {
    pub fn new(ctx: InstanceContext, source: S, state: SharedState, primacy: Primacy) -> Self {
        Manager {
            ctx,
            source,
            state,
            primacy,
            postmaster: None,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(30)),
            restart_not_before: None,
            started_at: None,
            stalled_since: None,
            stall_rejoins: 0,
            streaming_ticks: 0,
            passwords_converged: false,
            reload_pending: false,
            awaited_primary: None,
            stanza: StanzaCreation::default(),
            backups: Backups::default(),
            backup_server: BackupServer::default(),
            statistics: StatisticsAfterUpgrade::default(),
            credentials_problem: None,
            certificates_problem: None,
            declared_roles: DeclaredRoles::default(),
        }
    }

    /// Runs until `shutdown` resolves, then stops PostgreSQL (fast, then
    /// immediate after the stop timeout) and returns.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), ConvergenceError> {
        self.check_version().await?;
        tokio::pin!(shutdown);
        let mut source_open = true;
        // A failing step (say, a clone from an unreachable primary) is
        // retried after a growing delay rather than every tick; a change of
        // the desired state retries at once.
        let mut retry = Backoff::new(TICK, Duration::from_secs(30));
        let mut lease = self.primacy.watch();
        let mut lease_open = true;
        let mut follow = self.primacy.watch_follow();
        let mut follow_open = true;
        loop {
            let desired = self.source.latest();
            let step = tokio::select! {
                result = self.step(desired.as_ref()) => Some(result),
                () = &mut shutdown => None,
            };
            let wait = match step {
                None => break,
                Some(Ok(())) => {
                    self.state.lock().last_error = None;
                    retry.reset();
                    TICK
                }
                Some(Err(error)) => {
                    let delay = retry.next_delay();
                    tracing::warn!(%error, retry_in_seconds = delay.as_secs_f64(), "convergence step failed");
                    self.state.lock().last_error = Some(error.to_string());
                    delay
                }
            };
            tokio::select! {
                () = &mut shutdown => break,
                changed = self.source.changed(), if source_open => {
                    if changed.is_err() {
                        tracing::warn!("desired state source closed; keeping the last state");
                        source_open = false;
                    }
                }
                changed = lease.changed(), if lease_open => lease_open = changed.is_ok(),
                changed = follow.changed(), if follow_open => follow_open = changed.is_ok(),
                exit = exited(&mut self.postmaster) => self.on_unexpected_exit(exit),
                () = tokio::time::sleep(wait) => {}
            }
        }
        self.state.set_phase(InstancePhase::ShuttingDown);
        self.stop_postgres().await;
        Ok(())
    }

    /// Refuses to run a data directory of another major version.
    async fn check_version(&self) -> Result<(), ConvergenceError> {
        let pgdata = &self.ctx.settings.pgdata;
        if !datadir::is_initialized(pgdata) {
            return Ok(());
        }
        let output = self
            .ctx
            .user
            .command(&self.ctx.settings.binary("postgres"))
            .arg("--version")
            .output()
            .await
            .map_err(ConvergenceError::VersionCommand)?;
        let binary = version::parse_version_output(&String::from_utf8_lossy(&output.stdout))?;
        let data = datadir::data_major_version(pgdata)?;
        if !version::can_run(binary.major, data) {
            return Err(ConvergenceError::VersionMismatch {
                data,
                binary: binary.major,
            });
        }
        Ok(())
    }

    fn on_unexpected_exit(&mut self, exit: Result<std::process::ExitStatus, SupervisorError>) {
        self.postmaster = None;
        {
            let mut state = self.state.lock();
            if std::mem::take(&mut state.lease_fenced) {
                // The lease task stopped it: a fence, not a crash. The
                // operator may promote another instance once this phase
                // is reported: nothing of PostgreSQL may run on by then.
                self.kill_leftovers();
                state.postmaster_pid = None;
                state.phase = InstancePhase::WaitingForLease;
                tracing::warn!(exit = ?exit.map(|s| s.to_string()), "PostgreSQL stopped: the primary lease is not held");
                return;
            }
        }
        if self
            .started_at
            .is_some_and(|started| started.elapsed() > STABLE_AFTER)
        {
            self.backoff.reset();
        }
        let delay = self.backoff.next_delay();
        self.restart_not_before = Some(Instant::now() + delay);
        let mut state = self.state.lock();
        state.crash_count += 1;
        state.postmaster_pid = None;
        state.phase = InstancePhase::CrashRecovery;
        tracing::error!(
            exit = ?exit.map(|s| s.to_string()),
            restart_in_ms = delay.as_millis() as u64,
            crashes = state.crash_count,
            "postgres exited unexpectedly; restarting after a back-off"
        );
    }

    async fn step(&mut self, desired: Option<&DesiredState>) -> Result<(), ConvergenceError> {
        self.follow_credentials();
        self.follow_certificates();
        let Some(desired) = desired else {
            // Nothing is started before the operator's intent is known: a
            // former primary started blindly could accept writes.
            return Ok(());
        };
        {
            let mut state = self.state.lock();
            state.fenced = desired.fenced;
            state.target_primary = desired.target_primary.clone();
            state.desired_state_errors.clone_from(&desired.problems);
        }
        let action = self.bootstrapped(desired).await?;
        self.want_lease(desired, action);
        let running_primary = matches!(action, Action::RunPrimary)
            && self.primacy.held()
            && self.postmaster.is_some()
            && self.passwords_converged;
        self.stanza
            .converge(&self.ctx, desired, &self.state, running_primary);
        let serving = match action {
            _ if running_primary => Serving::Primary,
            Action::RunStandby(_) if self.postmaster.is_some() => Serving::Standby,
            _ => Serving::Nothing,
        };
        self.backups
            .converge(&self.ctx, desired, &self.state, serving);
        self.backup_server.converge(&self.ctx, desired, &self.state);
        self.statistics.converge(&self.ctx, running_primary);
        self.declared_roles
            .converge(&self.ctx, desired, &self.state, running_primary);
        match action {
            Action::Fence => {
                self.stop_postgres().await;
                self.primacy.want(Intent::release(desired.lease_timing));
                self.state.set_phase(InstancePhase::Fenced);
                Ok(())
            }
            Action::Initdb | Action::Clone(_) | Action::AwaitPrimary => {
                self.state.set_phase(InstancePhase::WaitingForPrimary);
                Ok(())
            }
            Action::HoldPrimary => {
                if self.postmaster.is_none() {
                    self.state.set_phase(InstancePhase::WaitingForPrimary);
                }
                Ok(())
            }
            Action::RunPrimary if !self.primacy.held() => {
                // Never a primary without the lease: stop (the lease task
                // has already killed it) and wait for it.
                self.stop_postgres().await;
                self.kill_leftovers();
                self.state.set_phase(InstancePhase::WaitingForLease);
                Ok(())
            }
            Action::RunPrimary => {
                self.ensure_running(desired, Some(ReplicationRole::Primary))
                    .await?;
                self.state.lock().primary_pid = self.postmaster.as_ref().map(Postmaster::pid);
                self.converge_passwords().await
            }
            Action::Promote => {
                self.ensure_running(desired, None).await?;
                if !self.primacy.held() {
                    self.state.set_phase(InstancePhase::WaitingForLease);
                    return Ok(());
                }
                self.promote(desired).await
            }
            Action::Demote(address) => self.demote(desired, address).await,
            Action::RunStandby(address) => self.run_standby(desired, address).await,
        }
    }

    /// What to do now: the plan, once the data directory the plan asks for
    /// (`initdb`, a restore or a clone) exists.
    async fn bootstrapped(&self, desired: &DesiredState) -> Result<Action, ConvergenceError> {
        let me = &self.ctx.settings.pod_name;
        let action = plan(me, desired, self.local_state());
        if !matches!(action, Action::Initdb | Action::Clone(_)) {
            return Ok(action);
        }
        self.state.set_phase(InstancePhase::Bootstrapping);
        match action {
            Action::Clone(address) => bootstrap::clone_from(&self.ctx, desired, address).await?,
            _ => match &desired.restore {
                Some(source) => bootstrap::restore(&self.ctx, desired, source).await?,
                None => bootstrap::initdb(&self.ctx, desired).await?,
            },
        }
        Ok(plan(me, desired, self.local_state()))
    }

    /// Asks for the primary lease while this instance is, or is about to
    /// become, the primary. It is given up only once PostgreSQL has
    /// stopped as primary (`demote` and the fence release it then).
    fn want_lease(&self, desired: &DesiredState, action: Action) {
        let hold = match action {
            Action::RunPrimary | Action::Promote => true,
            Action::HoldPrimary => self.postmaster.is_some(),
            Action::Fence | Action::Demote(_) => return,
            _ => false,
        };
        self.primacy.want(Intent {
            hold,
            takeover: desired.lease_takeover.clone(),
            timing: desired.lease_timing,
        });
    }

    /// True while the target primary holds the primary lease in this
    /// manager's view (see [`crate::primacy::view`]).
    fn may_stream(&self, desired: &DesiredState) -> bool {
        desired
            .target_primary
            .as_deref()
            .is_some_and(|target| self.primacy.may_follow(target))
    }

    /// A standby of the primary at `address` under `desired`: streaming
    /// from it only while it holds a live lease, detached otherwise, so
    /// that a primary that lost its lease gets no confirmation from here.
    fn standby_role(&self, desired: &DesiredState, address: IpAddr) -> ReplicationRole {
        if self.may_stream(desired) {
            ReplicationRole::Standby(self.ctx.upstream(address))
        } else {
            ReplicationRole::Detached
        }
    }

    fn local_state(&self) -> LocalState {
        let pgdata = &self.ctx.settings.pgdata;
        LocalState {
            initialized: datadir::is_initialized(pgdata),
            standby: datadir::is_standby(pgdata),
        }
    }

    /// Writes the configuration for `role` (when known), starts PostgreSQL
    /// if it is not running, reloads it when the configuration changed and
    /// restarts it when a changed setting needs a restart.
    async fn ensure_running(
        &mut self,
        desired: &DesiredState,
        role: Option<ReplicationRole>,
    ) -> Result<(), ConvergenceError> {
        let pgdata = self.ctx.settings.pgdata.clone();
        let changed = match role {
            Some(role) => self.ctx.write_config(&pgdata, desired, role)?,
            None => false,
        };
        if self.postmaster.is_some() {
            // Remembered until a reload succeeds: the files are already
            // written, so a failed reload would otherwise be forgotten.
            self.reload_pending |= changed;
            if self.reload_pending {
                self.reload(desired.restart_for_pending).await?;
            }
            if self
                .started_at
                .is_some_and(|started| started.elapsed() > STABLE_AFTER)
            {
                self.backoff.reset();
            }
            self.state.set_phase(InstancePhase::Running);
            return Ok(());
        }
        if self
            .restart_not_before
            .is_some_and(|not_before| Instant::now() < not_before)
        {
            return Ok(());
        }
        if !crate::datadir::is_standby(&pgdata) && !self.primacy.held() {
            // Without standby.signal PostgreSQL starts writable: never
            // without the lease (say, a promotion that finished after the
            // lease lapsed and another instance took over).
            tracing::warn!("not starting a writable PostgreSQL without the primary lease");
            self.state.set_phase(InstancePhase::WaitingForLease);
            return Ok(());
        }
        self.start()?;
        self.state.set_phase(InstancePhase::Running);
        Ok(())
    }

    fn start(&mut self) -> Result<(), ConvergenceError> {
        self.ctx.prepare_run_dir()?;
        let postmaster = Postmaster::start(
            &self.ctx.user,
            &self.ctx.settings.bin_dir,
            &self.ctx.settings.pgdata,
            &[],
            &self.ctx.pgbackrest_env(),
            Some(self.state.clone()),
        )?;
        self.state.lock().postmaster_pid = Some(postmaster.pid());
        self.postmaster = Some(postmaster);
        // A fresh start reads the current files.
        self.reload_pending = false;
        self.started_at = Some(Instant::now());
        self.restart_not_before = None;
        Ok(())
    }

    /// On the primary, once per manager start and after each rotation
    /// ([`rotation`]): the database passwords follow the mounted
    /// credentials. Retried on the next tick while PostgreSQL is still
    /// starting.
    async fn converge_passwords(&mut self) -> Result<(), ConvergenceError> {
        if self.passwords_converged || self.postmaster.is_none() {
            return Ok(());
        }
        let Ok(client) = sql::connect(&self.ctx.local_target(), "postgres").await else {
            return Ok(());
        };
        passwords::converge(&client, &self.ctx.settings.credentials).await?;
        self.passwords_converged = true;
        Ok(())
    }

    /// Signals a reload, then, with `restart`, restarts PostgreSQL if a
    /// changed setting takes effect only at restart
    /// (`pg_settings.pending_restart`); without, the setting stays pending
    /// and `/status` lists it (the operator restarts the cluster's
    /// instances one at a time, see `DesiredState::restart_for_pending`).
    async fn reload(&mut self, restart: bool) -> Result<(), ConvergenceError> {
        let client = sql::connect(&self.ctx.local_target(), "postgres").await?;
        client
            .query_one("SELECT pg_reload_conf()", &[])
            .await
            .map_err(SqlError::from)?;
        // The reload is asynchronous; a new session sees the outcome.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let client = sql::connect(&self.ctx.local_target(), "postgres").await?;
        let pending: Vec<String> = client
            .query(
                "SELECT name FROM pg_settings WHERE pending_restart ORDER BY name",
                &[],
            )
            .await
            .map_err(SqlError::from)?
            .iter()
            .filter_map(|row| row.try_get(0).ok())
            .collect();
        self.reload_pending = false;
        tracing::info!(?pending, "configuration reloaded");
        if !pending.is_empty() && !restart {
            tracing::info!(
                ?pending,
                "settings wait for a restart, which the operator makes one instance at a time"
            );
        }
        if !pending.is_empty() && restart {
            self.state.set_phase(InstancePhase::Restarting);
            tracing::info!(?pending, "restarting to apply settings that need a restart");
            self.stop_postgres().await;
            self.start()?;
        }
        Ok(())
    }

    /// SIGKILL to any process still working in the data directory (a
    /// backend whose postmaster was killed), before the phase tells the
    /// operator PostgreSQL is stopped.
    fn kill_leftovers(&self) {
        let pgdata = &self.ctx.settings.pgdata;
        let killed = crate::fence::processes::sweep(pgdata, None, &BTreeSet::new());
        if !killed.is_empty() {
            tracing::warn!(processes = ?killed, "killed processes of PostgreSQL left after it stopped");
        }
    }

    async fn stop_postgres(&mut self) {
        if let Some(postmaster) = self.postmaster.take() {
            postmaster.stop(self.ctx.settings.stop_timeout).await;
        }
        let mut state = self.state.lock();
        state.postmaster_pid = None;
        state.primary_pid = None;
        state.lease_fenced = false;
    }
}
