//! Leader election (R12): several operator replicas may run; only the one
//! holding the Lease reconciles. Losing the Lease stops the controller at
//! once (in-flight reconciles finish), and it starts again if the Lease
//! comes back.

use std::future::Future;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

/// Name of the Lease the operator replicas compete for.
pub const LEASE_NAME: &str = "tusk-operator-leader";

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("cannot set up leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
}

/// Timing of the Lease.
#[derive(Clone, Copy, Debug)]
pub struct LeaseTiming {
    /// Seconds a holder's claim stays valid without renewal.
    pub duration_seconds: u64,
    /// Seconds before expiry at which the holder renews.
    pub grace_seconds: u64,
}

impl Default for LeaseTiming {
    fn default() -> Self {
        Self {
            duration_seconds: 15,
            grace_seconds: 5,
        }
    }
}

/// Runs `lead` whenever this replica holds the Lease, until `stop` is
/// true. `lead` receives a future that completes when leadership is lost
/// (or on stop), for the controller's graceful shutdown.
pub async fn run_while_leader<F, Fut>(
    client: Client,
    namespace: &str,
    identity: &str,
    timing: LeaseTiming,
    mut stop: watch::Receiver<bool>,
    mut lead: F,
) -> Result<(), LeaderError>
where
    F: FnMut(std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>) -> Fut,
    Fut: Future<Output = ()>,
{
    let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(timing.duration_seconds)
        .with_grace(timing.grace_seconds)
        .build()
        .await?;
    let (mut leading, task) = manager.watch().await;
    loop {
        if *stop.borrow() {
            break;
        }
        if *leading.borrow_and_update() {
            tracing::info!(identity, "leading: starting the controller");
            let mut lost = leading.clone();
            let mut stop_signal = stop.clone();
            let lost_or_stopped = Box::pin(async move {
                tokio::select! {
                    _ = lost.wait_for(|leading| !*leading) => {}
                    _ = stop_signal.wait_for(|stop| *stop) => {}
                }
            });
            lead(lost_or_stopped).await;
            tracing::info!(identity, "no longer leading: controller stopped");
            continue;
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() { break },
            _ = stop.wait_for(|stop| *stop) => break,
        }
    }
    // Dropping the receiver ends the manager's task, which releases the Lease.
    drop(leading);
    match task.await {
        Ok(Ok(manager)) => {
            if let Err(error) = manager.release().await {
                tracing::warn!(%error, "could not release the leader Lease");
            }
        }
        Ok(Err(error)) => tracing::warn!(%error, "leader election ended with an error"),
        Err(error) => tracing::warn!(%error, "leader election task failed"),
    }
    Ok(())
}
