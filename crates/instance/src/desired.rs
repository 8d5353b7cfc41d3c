//! The desired state of one instance, as the operator declares it through
//! the PostgresCluster (targetPrimary, the primary's pod IP, fencing,
//! parameters, synchronous replication, WAL archiving), behind a small trait so that the
//! PostgreSQL logic runs the same with the API watch and in tests.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;

use tokio::sync::watch;

use tusk_api::primacy::LeaseTiming;
use tusk_api::v1alpha1::BackupAssignment;
use tusk_postgres::pgbackrest::Repository;
pub use tusk_postgres::pgbackrest::RestoreSource;

use crate::postgres::synchronous::SynchronousStandbys;

/// What the cluster declares about this instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredState {
    /// The instance that must be primary; `None` while the operator has not
    /// chosen one (nothing is promoted or demoted then).
    pub target_primary: Option<String>,
    /// Pod IP of the target primary, once known.
    pub primary_address: Option<IpAddr>,
    /// PostgreSQL must be stopped and stay stopped.
    pub fenced: bool,
    /// `spec.postgres.parameters`, with the values the operator owns
    /// (`synchronous_commit` under required durability) in force.
    pub parameters: BTreeMap<String, String>,
    /// `spec.replication.synchronous`, with the other instances' names.
    pub synchronous: Option<SynchronousStandbys>,
    /// How the primary lease is held (from `spec.failover.delaySeconds`).
    pub lease_timing: LeaseTiming,
    /// `status.primaryLeaseTakeover`: the lease version the operator found
    /// expired when it chose the target primary.
    pub lease_takeover: Option<String>,
    /// Application database and its owner (`spec.bootstrap.initdb`).
    pub database: String,
    pub owner: String,
    /// `spec.postgres.superuserAccess`: the superuser may log in over the
    /// network.
    pub superuser_access: bool,
    /// When a changed setting needs a restart: restart PostgreSQL at once
    /// (`true`: an instance on its own), or leave the setting pending and
    /// list it on `/status` (`false`: an instance of a cluster, whose
    /// operator restarts the instances one at a time by replacing their
    /// pods, replicas first, so that they never all restart together).
    pub restart_for_pending: bool,
    /// Where WAL is archived (`spec.backup` with `walArchiving`); `None`
    /// when it is not.
    pub archiving: Option<Repository>,
    /// The base backup being taken (`status.backup.running`), by this
    /// instance or another.
    pub backup: Option<BackupAssignment>,
    /// Where the first instance's data comes from when it is restored
    /// (`spec.bootstrap.recovery`) instead of created by `initdb`.
    pub restore: Option<RestoreSource>,
    /// Why part of the declaration could not be read (a malformed fencing
    /// annotation, an impossible synchronous number). The affected part
    /// took its safe value (fenced; the last synchronous setting), and the
    /// problems are reported on `/status` until they are fixed.
    pub problems: Vec<String>,
    /// `spec.roles`, with each password as read from its Secret (read
    /// only while this instance is the target primary).
    pub roles: Vec<crate::declared_roles::DeclaredRole>,
}

impl DesiredState {
    /// A primary-less state with default database names; tests and the API
    /// watch fill in the rest.
    pub fn new(target_primary: Option<&str>) -> Self {
        DesiredState {
            target_primary: target_primary.map(str::to_owned),
            primary_address: None,
            fenced: false,
            parameters: BTreeMap::new(),
            synchronous: None,
            lease_timing: LeaseTiming::for_delay(
                tusk_api::v1alpha1::FailoverSpec::default().delay_seconds,
            ),
            lease_takeover: None,
            database: tusk_postgres::roles::DEFAULT_APP.into(),
            owner: tusk_postgres::roles::DEFAULT_APP.into(),
            superuser_access: false,
            restart_for_pending: true,
            archiving: None,
            backup: None,
            restore: None,
            problems: Vec::new(),
            roles: Vec::new(),
        }
    }
}

/// The source of desired state ended for good.
#[derive(Debug, thiserror::Error)]
#[error("the source of desired state has closed")]
pub struct SourceClosed;

/// Where the instance manager learns what it should be.
pub trait DesiredStateSource: Send {
    /// The latest desired state; `None` until the first one is known.
    fn latest(&mut self) -> Option<DesiredState>;

    /// Resolves when the desired state may have changed. Cancel-safe.
    fn changed(&mut self) -> impl Future<Output = Result<(), SourceClosed>> + Send;
}

impl DesiredStateSource for watch::Receiver<Option<DesiredState>> {
    fn latest(&mut self) -> Option<DesiredState> {
        self.borrow_and_update().clone()
    }

    async fn changed(&mut self) -> Result<(), SourceClosed> {
        watch::Receiver::changed(self)
            .await
            .map_err(|_| SourceClosed)
    }
}
