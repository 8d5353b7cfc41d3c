//! Work the convergence loop runs beside itself (creating the stanza,
//! taking a backup): started as a task, then collected once finished,
//! never waited for.

use tokio::task::JoinHandle;

/// The task in `slot` with its key, once it has finished, and its outcome
/// (a task that panicked or was cancelled is an error naming `what`).
pub fn take_finished<K, T>(
    slot: &mut Option<(K, JoinHandle<T>)>,
    what: &str,
) -> Option<(K, Result<T, String>)> {
    let (key, handle) = slot.take_if(|(_, h)| h.is_finished())?;
    let outcome = match futures::FutureExt::now_or_never(handle) {
        Some(Ok(value)) => Ok(value),
        Some(Err(join)) => Err(format!("the {what} task failed: {join}")),
        None => Err(format!("the {what} task did not finish")),
    };
    Some((key, outcome))
}
