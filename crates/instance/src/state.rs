//! What the convergence loop tells the HTTP API: its phase, the last error,
//! the postmaster's process id. Shared behind a mutex; never holds secrets.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tusk_api::instance::InstancePhase;

/// The manager's view of itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ManagerState {
    pub phase: InstancePhase,
    pub fenced: bool,
    pub target_primary: Option<String>,
    pub postmaster_pid: Option<i32>,
    /// The postmaster while it runs as primary: the one the lease task
    /// stops when the primary lease lapses.
    pub primary_pid: Option<i32>,
    /// The lease task stopped the primary: its exit is a fence, not a crash.
    pub lease_fenced: bool,
    /// The lease lapsed and the fence has not yet seen every process of
    /// the instance gone: `/healthz` fails while any is alive.
    pub fence_pending: bool,
    /// While PostgreSQL runs under the primary lease: when the lease's
    /// fence time runs out unless renewed. Past it, `/healthz` fails while
    /// any process of the instance is alive, even if the lease task that
    /// writes it hangs.
    pub lease_deadline: Option<std::time::Instant>,
    pub crash_count: u32,
    pub last_error: Option<String>,
    /// What the desired state could not read (see `DesiredState::problems`).
    pub desired_state_errors: Vec<String>,
    /// WAL archiving, when the cluster archives WAL.
    pub archiving: Option<ArchivingState>,
    /// Whether the API server answered within the lease's fence time
    /// (`None` without the Kubernetes API); see `primacy::view`.
    pub api_server_reachable: Option<bool>,
    /// The base backup last asked of this instance, and how it went.
    pub backup: Option<tusk_api::instance::BackupReport>,
    /// The newest error pgBackRest printed when PostgreSQL's
    /// `archive_command` failed (an asynchronous push that times out
    /// leaves no status file; this is then its only account).
    pub archive_push_error: Option<String>,
    /// pgBackRest's TLS server, while it runs with a certificate naming
    /// this pod ([`crate::backup_server`]).
    pub backup_server: Option<tusk_api::v1alpha1::BackupServer>,
    /// The declared roles as this primary last converged them
    /// ([`crate::declared_roles`]); `None` on a standby.
    pub roles: Option<Vec<tusk_api::v1alpha1::RoleStatus>>,
}

/// The stanza as the manager knows it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ArchivingState {
    pub stanza: String,
    /// `stanza-create` succeeded since the manager started.
    pub stanza_created: bool,
    /// Why the last `stanza-create` failed.
    pub stanza_error: Option<String>,
}

impl Default for ManagerState {
    fn default() -> Self {
        ManagerState {
            phase: InstancePhase::WaitingForPrimary,
            fenced: false,
            target_primary: None,
            postmaster_pid: None,
            primary_pid: None,
            lease_fenced: false,
            fence_pending: false,
            lease_deadline: None,
            crash_count: 0,
            last_error: None,
            desired_state_errors: Vec::new(),
            archiving: None,
            api_server_reachable: None,
            backup: None,
            archive_push_error: None,
            backup_server: None,
            roles: None,
        }
    }
}

/// A handle on the shared [`ManagerState`].
#[derive(Clone, Debug, Default)]
pub struct SharedState(Arc<Mutex<ManagerState>>);

impl SharedState {
    pub fn lock(&self) -> MutexGuard<'_, ManagerState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn snapshot(&self) -> ManagerState {
        self.lock().clone()
    }

    pub fn set_phase(&self, phase: InstancePhase) {
        let mut state = self.lock();
        if state.phase != phase {
            tracing::info!(from = ?state.phase, to = ?phase, "phase changed");
            state.phase = phase;
        }
    }
}
