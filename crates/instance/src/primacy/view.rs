//! A standby's view of the primary lease.
//!
//! A standby that streams WAL confirms the primary's commits (synchronous
//! replication waits for its flush position). A primary whose postmaster
//! and manager hang while its backends run on can neither renew the lease
//! nor stop PostgreSQL: its client sessions keep committing for as long as
//! a standby keeps confirming. So a standby streams only from the instance
//! it sees holding a *live* lease: one whose version it saw change less
//! than `fence_after` ago on its own monotonic clock, the holder's own
//! fence time. A standby cut off from the API server sees no change and
//! stops streaming then; the operator replaces the primary only once the
//! same version stood for the lease's whole duration (`tusk_api::primacy`).
//! Every standby has thus stopped confirming the old primary's commits
//! before a new primary is chosen, as long as a lease change reaches this
//! manager's watch less than `duration - fence_after` (2 s of a 5 s lease)
//! after it reaches the operator's.
//!
//! The same reads tell whether this instance reaches the API server at
//! all ([`reachable`], in its report): one that does not could not take
//! the lease over, so the operator does not choose it.
//!
//! [`live_holder`] is the pure rule; [`LeaseWatch`] feeds it from a watch
//! on the lease (and reads while no renewal comes) and publishes it.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::time::Instant;
use tusk_api::primacy::LeaseTiming;

use crate::state::SharedState;

/// Whom a standby may stream from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Follow {
    /// Any primary: the instance runs without the Kubernetes API (the
    /// instance manager's own tests).
    Any,
    /// Only this instance, the holder of a live lease.
    Holder(String),
    /// No one: the lease is free, absent, unread, or not renewed in time.
    Nobody,
}

impl Follow {
    /// True when a standby may stream from the instance `primary`.
    pub fn allows(&self, primary: &str) -> bool {
        match self {
            Follow::Any => true,
            Follow::Holder(holder) => holder == primary,
            Follow::Nobody => false,
        }
    }
}

/// The lease as last seen changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sighting {
    pub version: String,
    /// `spec.holderIdentity`, `None` when released.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration_seconds: u32,
    /// When this manager first saw this version.
    pub since: Instant,
}

impl Sighting {
    /// When a lease renewed last at `since` stops being live here.
    pub fn lapses_at(&self) -> Instant {
        self.since + LeaseTiming::for_duration(self.duration_seconds).fence_after
    }
}

/// The rule: the holder of a lease whose version changed less than its
/// fence time ago.
pub fn live_holder(seen: Option<&Sighting>, now: Instant) -> Follow {
    match seen {
        Some(seen) if now < seen.lapses_at() => seen
            .holder
            .clone()
            .filter(|h| !h.is_empty())
            .map_or(Follow::Nobody, Follow::Holder),
        _ => Follow::Nobody,
    }
}

/// When the view must be looked at again for a lapse: only a lapse still
/// ahead (one already past would wake the loop at once, again and again).
pub fn lapse_ahead(seen: Option<&Sighting>, now: Instant) -> Option<Instant> {
    seen.map(Sighting::lapses_at).filter(|at| *at > now)
}

/// Records `lease` as seen at `now`: a new version restarts the count,
/// the same version (a watch that reconnected and listed again) does not.
pub fn record(seen: &mut Option<Sighting>, lease: &Lease, now: Instant) {
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    if seen.as_ref().is_some_and(|s| s.version == version) {
        return;
    }
    let spec = lease.spec.as_ref();
    *seen = Some(Sighting {
        version,
        holder: spec.and_then(|s| s.holder_identity.clone()),
        duration_seconds: spec
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(0),
        since: now,
    });
}

/// How a standby reads the lease: a watch, and, while the watch brings
/// no renewal, a read every renewal period so that "the lease is not
/// renewed" (the reads answer) and "this instance cannot reach the API
/// server" (they do not) are told apart.
pub struct LeaseWatch {
    pub api: Api<Lease>,
    pub name: String,
    /// What the standby may follow.
    pub sender: watch::Sender<Follow>,
    /// Where [`reachable`] is recorded for the instance's report.
    pub state: SharedState,
}

/// True when the API server answered (a watch event or a read) within
/// `window`, the holder's fence time: a standby that cannot reach it
/// cannot take the lease over, so the operator does not choose it.
pub fn reachable(last_answer: Option<Instant>, window: Duration, now: Instant) -> bool {
    last_answer.is_some_and(|at| now.saturating_duration_since(at) < window)
}

impl LeaseWatch {
    /// Publishes [`live_holder`] at every change and every lapse, until
    /// every receiver is gone. A panic in the watch publishes that no one
    /// may be followed (its last word could name a holder whose lease
    /// lapses unseen), and the watch starts again.
    pub async fn run(self) {
        supervised(&self.sender, &self.name, || self.watch()).await;
    }

    async fn watch(&self) {
        let LeaseWatch {
            api,
            name,
            sender,
            state,
        } = self;
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(api.clone(), config).default_backoff().boxed();
        let mut view = View::default();
        let mut failing = false;
        let mut read: Option<futures::future::BoxFuture<'static, Option<Option<Lease>>>> = None;
        loop {
            let timing = view.timing();
            let lapse = lapse_ahead(view.seen.as_ref(), Instant::now());
            tokio::select! {
                event = events.try_next() => match event {
                    Ok(Some(event)) => {
                        if std::mem::take(&mut failing) {
                            tracing::info!(lease = %name, "the primary lease can be watched again");
                        }
                        let now = Instant::now();
                        view.last_event = Some(now);
                        match event {
                            watcher::Event::Apply(lease) | watcher::Event::InitApply(lease) => {
                                view.answered(Some(&lease), now);
                            }
                            watcher::Event::Delete(_) => view.answered(None, now),
                            watcher::Event::Init | watcher::Event::InitDone => {
                                view.last_answer = Some(now);
                            }
                        }
                    }
                    Ok(None) => return,
                    Err(error) => {
                        if !std::mem::replace(&mut failing, true) {
                            tracing::warn!(%error, lease = %name, "cannot watch the primary lease; retrying");
                        }
                    }
                },
                answer = async { read.as_mut().expect("guarded").await }, if read.is_some() => {
                    read = None;
                    if let Some(lease) = answer {
                        view.answered(lease.as_ref(), Instant::now());
                    }
                }
                () = tokio::time::sleep_until(view.probe_at(&timing)), if read.is_none() => {
                    // A slow answer is still an answer: the API server is
                    // reachable, only busy. Waiting only a renewal period
                    // would call a standby cut off whenever reads take
                    // longer, and then no standby could be chosen.
                    let (api, name, limit) = (api.clone(), name.clone(), timing.duration);
                    read = Some(Box::pin(async move {
                        tokio::time::timeout(limit, api.get_opt(&name)).await.ok()?.ok()
                    }));
                    view.last_probe = Some(Instant::now());
                }
                () = sleep_until(lapse) => {}
                () = sender.closed() => return,
            }
            let now = Instant::now();
            state.lock().api_server_reachable =
                Some(reachable(view.last_answer, timing.fence_after, now));
            publish(sender, name, live_holder(view.seen.as_ref(), now));
        }
    }
}

/// What the lease task knows: the lease as last seen changed, when the
/// watch last brought something, when the API server last answered (the
/// watch or a read) and when it was last asked.
#[derive(Debug, Default)]
struct View {
    seen: Option<Sighting>,
    last_event: Option<Instant>,
    last_answer: Option<Instant>,
    last_probe: Option<Instant>,
}

impl View {
    /// The timing of the lease as seen (the shortest before any).
    fn timing(&self) -> LeaseTiming {
        LeaseTiming::for_duration(
            self.seen
                .as_ref()
                .map_or(tusk_api::primacy::MIN_LEASE_SECONDS, |s| s.duration_seconds),
        )
    }

    /// The API server answered at `now` with `lease` (`None`: there is none).
    fn answered(&mut self, lease: Option<&Lease>, now: Instant) {
        self.last_answer = Some(now);
        match lease {
            Some(lease) => record(&mut self.seen, lease, now),
            None => self.seen = None,
        }
    }

    /// When to read the lease: once the watch brought no renewal for two
    /// renewal periods, and then once a period (a read's answer does not
    /// postpone the next: while renewals stay away, answers must keep
    /// coming for the standby to count as reachable).
    fn probe_at(&self, timing: &LeaseTiming) -> Instant {
        self.last_event
            .map(|at| at + timing.renew_every * 2)
            .into_iter()
            .chain(self.last_probe.map(|at| at + timing.renew_every))
            .max()
            .unwrap_or_else(Instant::now)
    }
}

/// Runs `watch` until it returns or no receiver is left; after each
/// panic, publishes that no one may be followed (the last word could name
/// a holder whose lease lapses unseen) and runs it again.
async fn supervised<Watch, Running>(sender: &watch::Sender<Follow>, lease: &str, mut watch: Watch)
where
    Watch: FnMut() -> Running,
    Running: std::future::Future<Output = ()>,
{
    loop {
        let watching = AssertUnwindSafe(watch()).catch_unwind().await;
        if watching.is_ok() || sender.is_closed() {
            return;
        }
        tracing::error!(
            lease,
            "the primary lease view panicked: streaming from no one"
        );
        publish(sender, lease, Follow::Nobody);
        tokio::time::sleep(
            LeaseTiming::for_duration(tusk_api::primacy::MIN_LEASE_SECONDS).renew_every,
        )
        .await;
    }
}

/// Publishes whom a standby may follow, logging each change.
fn publish(sender: &watch::Sender<Follow>, lease: &str, follow: Follow) {
    sender.send_if_modified(|current| {
        if *current == follow {
            return false;
        }
        match &follow {
            Follow::Nobody => tracing::warn!(
                lease,
                was = ?current,
                "no live primary lease in view: streaming from no one"
            ),
            _ => tracing::info!(lease, follow = ?follow, "primary lease in view"),
        }
        *current = follow;
        true
    });
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use kube::api::ObjectMeta;

    use super::*;

    fn lease(version: &str, holder: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(5),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_renewed_lease_is_followed_until_its_fence_time_passes_unrenewed() {
        let start = Instant::now();
        let mut seen = None;
        assert_eq!(live_holder(None, start), Follow::Nobody, "never seen");
        record(&mut seen, &lease("1", Some("db-1")), start);
        assert_eq!(
            live_holder(seen.as_ref(), start),
            Follow::Holder("db-1".into())
        );
        // A 5 s lease: the holder fences 3 s after its last renewal.
        let almost = start + Duration::from_millis(2_999);
        assert!(live_holder(seen.as_ref(), almost).allows("db-1"));
        assert!(!live_holder(seen.as_ref(), almost).allows("db-2"));
        let lapsed = start + Duration::from_secs(3);
        assert_eq!(live_holder(seen.as_ref(), lapsed), Follow::Nobody);
        assert_eq!(lapse_ahead(seen.as_ref(), almost), Some(lapsed));
        assert_eq!(lapse_ahead(seen.as_ref(), lapsed), None, "past: no wake-up");

        // A renewal (a new version) starts the count again...
        record(&mut seen, &lease("2", Some("db-1")), almost);
        assert!(live_holder(seen.as_ref(), lapsed).allows("db-1"));
        // ...the same version seen again (a watch that listed again) does not.
        let later = almost + Duration::from_secs(2);
        record(&mut seen, &lease("2", Some("db-1")), later);
        assert_eq!(
            live_holder(seen.as_ref(), almost + Duration::from_secs(3)),
            Follow::Nobody
        );
    }

    #[test]
    fn a_released_or_taken_over_lease_moves_or_stops_streaming() {
        let now = Instant::now();
        let mut seen = None;
        record(&mut seen, &lease("7", None), now);
        assert_eq!(live_holder(seen.as_ref(), now), Follow::Nobody, "released");
        record(&mut seen, &lease("8", Some("")), now);
        assert_eq!(live_holder(seen.as_ref(), now), Follow::Nobody, "empty");
        record(&mut seen, &lease("9", Some("db-2")), now);
        let follow = live_holder(seen.as_ref(), now);
        assert!(
            follow.allows("db-2") && !follow.allows("db-1"),
            "{follow:?}"
        );
        assert!(Follow::Any.allows("db-1"), "without the API: any primary");
    }

    #[test]
    fn the_lease_is_read_only_while_renewals_stay_away_and_at_most_once_a_period() {
        let timing = LeaseTiming::for_duration(5);
        let start = Instant::now();
        let mut view = View::default();
        assert!(
            view.probe_at(&timing) <= Instant::now(),
            "nothing known: read now"
        );
        // The watch brought a renewal: no read for two renewal periods.
        view.last_event = Some(start);
        view.answered(Some(&lease("1", Some("db-1"))), start);
        assert_eq!(view.probe_at(&timing), start + Duration::from_secs(2));
        // A read that got no answer: the next waits a renewal period.
        let asked = start + Duration::from_secs(2);
        view.last_probe = Some(asked);
        assert_eq!(view.probe_at(&timing), asked + Duration::from_secs(1));
        // A slow answer does not postpone the next read either.
        view.answered(
            Some(&lease("1", Some("db-1"))),
            asked + Duration::from_millis(900),
        );
        assert_eq!(view.probe_at(&timing), asked + Duration::from_secs(1));
        view.answered(None, asked);
        assert_eq!(
            live_holder(view.seen.as_ref(), asked),
            Follow::Nobody,
            "deleted"
        );
    }

    #[tokio::test]
    async fn a_view_that_panics_follows_no_one_and_watches_again() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (sender, _follow) = watch::channel(Follow::Nobody);
        let runs = AtomicUsize::new(0);
        // What the view said when it was run again.
        let followed_on_rerun = std::sync::Mutex::new(None);
        let view = supervised(&sender, "db-primary", || {
            let run = runs.fetch_add(1, Ordering::SeqCst);
            let (sender, followed_on_rerun) = (&sender, &followed_on_rerun);
            async move {
                if run == 0 {
                    // Saw db-1 hold a live lease, then died.
                    publish(sender, "db-primary", Follow::Holder("db-1".into()));
                    panic!("the lease view panics");
                }
                *followed_on_rerun.lock().expect("lock") = Some(sender.borrow().clone());
            }
        });
        tokio::time::timeout(Duration::from_secs(10), view)
            .await
            .expect("supervised within 10 s");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "watched again");
        assert_eq!(
            *followed_on_rerun.lock().expect("lock"),
            Some(Follow::Nobody),
            "db-1 is not followed on the dead view's word"
        );
    }

    #[test]
    fn the_api_server_is_reachable_while_it_answered_within_the_fence_time() {
        let now = Instant::now();
        let window = Duration::from_secs(3);
        assert!(!reachable(None, window, now), "never answered");
        assert!(reachable(Some(now), window, now));
        let earlier = now.checked_sub(Duration::from_millis(2_900)).expect("boot");
        assert!(reachable(Some(earlier), window, now));
        let stale = now.checked_sub(window).expect("boot");
        assert!(!reachable(Some(stale), window, now), "cut off");
    }
}
