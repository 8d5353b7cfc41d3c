//! A value made afresh at most once per interval, by one caller at a time.
//!
//! The HTTP API's readers (the kubelet's probes, the operator's polls,
//! Prometheus, anyone on the pod network) each need what PostgreSQL says,
//! and asking means a superuser connection. Unshared, a flood of requests,
//! or only many at once, opens as many connections: beyond
//! `max_connections` they fail, readiness fails with them, and the
//! failover clock starts on a primary that was only busy. Shared through
//! [`Recent`], requests arriving together wait for one observation and all
//! answer with it: at most one connection at a time, however many ask.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

/// The last value made and when.
pub struct Recent<T> {
    max_age: Duration,
    slot: Mutex<Option<(Instant, T)>>,
}

impl<T: Clone> Recent<T> {
    pub fn new(max_age: Duration) -> Self {
        Recent {
            max_age,
            slot: Mutex::new(None),
        }
    }

    /// The value made less than `max_age` ago, or a new one from `make`.
    /// While one caller makes it, the others wait and then share it.
    pub async fn get<F, Fut>(&self, make: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let mut slot = self.slot.lock().await;
        if let Some((made, value)) = slot.as_ref()
            && made.elapsed() < self.max_age
        {
            return value.clone();
        }
        let value = make().await;
        *slot = Some((Instant::now(), value.clone()));
        value
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_together_share_one_value_and_a_later_one_gets_a_new_one() {
        let recent = Arc::new(Recent::new(Duration::from_millis(200)));
        let made = Arc::new(AtomicUsize::new(0));
        let make = |made: Arc<AtomicUsize>| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            made.fetch_add(1, Ordering::SeqCst) + 1
        };
        let callers: Vec<_> = (0..50)
            .map(|_| {
                let (recent, made) = (recent.clone(), made.clone());
                tokio::spawn(async move { recent.get(|| make(made)).await })
            })
            .collect();
        for caller in callers {
            assert_eq!(
                caller.await.expect("caller"),
                1,
                "all share the first value"
            );
        }
        assert_eq!(made.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            recent.get(|| make(made.clone())).await,
            2,
            "too old: made again"
        );
    }
}
