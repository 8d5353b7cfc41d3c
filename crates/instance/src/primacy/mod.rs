//! Lease-held primacy (see `tusk_api::primacy` for the guarantee): the
//! manager holds the primary lease while PostgreSQL runs as primary, and
//! stops PostgreSQL the moment the lease is no longer held.
//!
//! The convergence loop says what it wants ([`Primacy::want`]) and reads
//! whether the lease is held ([`Primacy::held`]); a task of its own renews
//! the lease. That task also carries out the fence: when the lease lapses
//! it kills every PostgreSQL process of the instance at once, without
//! waiting for the convergence loop, which may be busy with something
//! else. After every renewal it gives the fence watchdog
//! ([`crate::fence`]) the moment the lease's fence time runs out, so that
//! the fence holds when this task, or the whole manager, hangs.
//!
//! A standby streams only from the holder of a live lease ([`view`]), so
//! that a primary that can no longer renew it loses its synchronous
//! confirmations too.
//!
//! Both tasks are supervised: a panic in one would otherwise leave its
//! last word standing (the lease "held", a holder "live"). The lease task
//! that panics says at once that the lease is not held, fences as a lapse
//! does, and starts again from a fresh read; the view task says that no
//! one may be followed, and starts again.
//!
//! - [`decide`]: the pure choice of the next lease request.
//! - [`lease`]: the requests.
//! - [`view`]: a standby's view of the lease.

pub mod decide;
mod lease;
pub mod view;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::Duration;

use futures::FutureExt;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;
use tusk_api::primacy::LeaseTiming;

use crate::fence::{self, Watchdog};
use crate::state::SharedState;
pub use decide::Intent;
use lease::{LeaseClient, Outcome};
pub use view::Follow;

/// The convergence loop's handle on the primary lease.
pub struct Primacy {
    intent: watch::Sender<Intent>,
    held: watch::Receiver<bool>,
    /// Whom a standby may stream from.
    follow: watch::Receiver<Follow>,
    /// Keeps an unconditional handle's channels open.
    _always: Option<(watch::Sender<bool>, watch::Sender<Follow>)>,
    /// Where the lease task records the fence deadline (`None` without a
    /// lease): [`Primacy::held`] never says held past it.
    state: Option<SharedState>,
}

impl Primacy {
    /// Primacy without a lease: always held. For an instance run without
    /// the Kubernetes API (the instance manager's own tests).
    pub fn unconditional() -> Self {
        let (always, held) = watch::channel(true);
        let (any, follow) = watch::channel(Follow::Any);
        let (intent, _) = watch::channel(Intent::release(LeaseTiming::for_delay(0)));
        Primacy {
            intent,
            held,
            follow,
            _always: Some((always, any)),
            state: None,
        }
    }

    /// Primacy held through the primary lease of `cluster` in `namespace`
    /// as `me`. `state` names the postmaster to stop when the lease lapses;
    /// `guard` says what else to fence.
    pub fn lease(
        client: Client,
        namespace: &str,
        cluster: &str,
        me: &str,
        state: SharedState,
        guard: Guard,
    ) -> Self {
        let (intent, intent_rx) = watch::channel(Intent::release(LeaseTiming::for_delay(0)));
        let (held_tx, held) = watch::channel(false);
        let (follow_tx, follow) = watch::channel(Follow::Nobody);
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let view = view::LeaseWatch {
            api: api.clone(),
            name: tusk_api::primacy::lease_name(cluster),
            sender: follow_tx,
            state: state.clone(),
        };
        tokio::spawn(view.run());
        let client = LeaseClient::new(api, cluster, me.to_owned());
        tokio::spawn(hold(client, intent_rx, held_tx, state.clone(), guard));
        Primacy {
            intent,
            held,
            follow,
            _always: None,
            state: Some(state),
        }
    }

    /// Says what the loop wants of the lease; wakes the lease task when
    /// that changed.
    pub fn want(&self, intent: Intent) {
        self.intent.send_if_modified(|current| {
            let changed = *current != intent;
            *current = intent;
            changed
        });
    }

    /// True while the lease is held: as the lease task last said, and
    /// never past the fence deadline it armed. A manager thawed after a
    /// freeze (SIGSTOP, a paused VM) may run its convergence loop before
    /// its lease task, which would still say held: the deadline, on the
    /// monotonic clock, has passed all the same.
    pub fn held(&self) -> bool {
        let lapsed = self.state.as_ref().is_some_and(|state| {
            state
                .lock()
                .lease_deadline
                .is_some_and(|deadline| std::time::Instant::now() >= deadline)
        });
        *self.held.borrow() && !lapsed
    }

    /// A receiver that sees every change of [`Primacy::held`].
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.held.clone()
    }

    /// True when a standby may stream from `primary` (see [`view`]).
    pub fn may_follow(&self, primary: &str) -> bool {
        self.follow.borrow().allows(primary)
    }

    /// A receiver that sees every change of whom a standby may follow.
    pub fn watch_follow(&self) -> watch::Receiver<Follow> {
        self.follow.clone()
    }
}

/// What a lapse of the lease fences: every process working in the data
/// directory, and the watchdog that does it when the manager cannot.
pub struct Guard {
    pub pgdata: PathBuf,
    /// `None` where no watchdog can run (the manager's own tests): the
    /// manager alone fences then.
    pub watchdog: Option<Watchdog>,
}

/// The requests of one lease round, apart so that the supervision of
/// [`hold`] can be tested without an API server.
trait Rounds: Send {
    /// Reads the lease if needed, decides and writes.
    fn renew(&mut self, intent: &Intent) -> impl Future<Output = Result<Outcome, String>> + Send;
    /// Forgets the written copy: the next round reads the lease.
    fn forget(&mut self);
}

impl Rounds for LeaseClient {
    async fn renew(&mut self, intent: &Intent) -> Result<Outcome, String> {
        self.round(intent).await.map_err(|error| error.to_string())
    }

    fn forget(&mut self) {
        LeaseClient::forget(self);
    }
}

/// Renews while wanted, until the handle is dropped. A panic in a round
/// leaves nothing held: [`Primacy::held`] turns false at once, PostgreSQL
/// running as primary is fenced as when the lease lapses, and renewing
/// starts again a renewal period later from a fresh read of the lease.
async fn hold(
    mut client: impl Rounds,
    mut intent_rx: watch::Receiver<Intent>,
    held_tx: watch::Sender<bool>,
    state: SharedState,
    mut guard: Guard,
) {
    loop {
        let renewing = renew(&mut client, &mut intent_rx, &held_tx, &state, &mut guard);
        if AssertUnwindSafe(renewing).catch_unwind().await.is_ok() {
            return;
        }
        held_tx.send_if_modified(|held| std::mem::replace(held, false));
        client.forget();
        let intent = intent_rx.borrow().clone();
        tracing::error!("the primary lease task panicked: the lease counts as lost");
        if intent.hold || state.lock().primary_pid.is_some() {
            fence(&state, &mut guard, "the primary lease task panicked").await;
        }
        tokio::time::sleep(intent.timing.renew_every).await;
    }
}

/// The renewals of [`hold`], until the handle is dropped.
async fn renew(
    client: &mut impl Rounds,
    intent_rx: &mut watch::Receiver<Intent>,
    held_tx: &watch::Sender<bool>,
    state: &SharedState,
    guard: &mut Guard,
) {
    let mut held_until: Option<Instant> = None;
    // After a restart this manager may still be the holder: look once.
    let mut maybe_holder = true;
    let mut failures = 0_u32;
    loop {
        let intent = intent_rx.borrow_and_update().clone();
        let sent = Instant::now();
        let guarding = intent.hold || state.lock().primary_pid.is_some();
        if !guarding {
            // PostgreSQL does not run as primary (any more): a lapse from
            // here fences nothing.
            guard.disarm(state);
        }
        if intent.hold || maybe_holder {
            // Bounded, so that a hung request never delays the fence.
            let limit = (intent.timing.renew_every * 2).min(
                held_until.map_or(Duration::MAX, |until| until.saturating_duration_since(sent)),
            );
            let round = match tokio::time::timeout(limit, client.renew(&intent)).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within {:.1} s", limit.as_secs_f64())),
            };
            match round {
                Ok(outcome) => {
                    if failures > 0 {
                        tracing::info!(failures, "the primary lease can be written again");
                        failures = 0;
                    }
                    let was_held = held_until.is_some();
                    held_until =
                        (outcome == Outcome::Held).then(|| sent + intent.timing.fence_after);
                    maybe_holder = held_until.is_some();
                    if let Some(until) = held_until {
                        guard.arm(state, until);
                    }
                    if was_held && held_until.is_none() && guarding {
                        fence(state, guard, "another instance holds the primary lease").await;
                    }
                }
                Err(error) => {
                    client.forget();
                    failures += 1;
                    // The first failure of a run is a warning; the rest
                    // would only repeat it.
                    if failures == 1 {
                        tracing::warn!(%error, "cannot write the primary lease; retrying");
                    }
                }
            }
        }
        if held_until.is_some_and(|until| Instant::now() >= until) {
            held_until = None;
            if guarding {
                fence(state, guard, "the primary lease was not renewed in time").await;
            }
        }
        held_tx.send_if_modified(|held| {
            let now = held_until.is_some();
            std::mem::replace(held, now) != now
        });
        let next = sent + intent.timing.renew_every;
        let wake = held_until.map_or(next, |until| until.min(next));
        let idle = !intent.hold && !maybe_holder;
        tokio::select! {
            () = tokio::time::sleep_until(wake), if !idle => {}
            changed = intent_rx.changed() => if changed.is_err() { return },
        }
    }
}

impl Guard {
    fn arm(&mut self, state: &SharedState, until: Instant) {
        state.lock().lease_deadline = Some(until.into_std());
        if let Some(watchdog) = &mut self.watchdog {
            watchdog.arm(until);
        }
    }

    fn disarm(&mut self, state: &SharedState) {
        state.lock().lease_deadline = None;
        if let Some(watchdog) = &mut self.watchdog {
            watchdog.disarm();
        }
    }
}

/// Kills every process of the instance (the postmaster and every backend:
/// no session may commit another transaction), and disarms the watchdog
/// once none is left, so that it does not kill a standby started after.
async fn fence(state: &SharedState, guard: &mut Guard, why: &str) {
    let postmaster = {
        let mut state = state.lock();
        state.primary_pid = None;
        state.fence_pending = true;
        // Its exit is a fence, not a crash.
        state.lease_fenced = state.postmaster_pid.is_some();
        state.postmaster_pid
    };
    tracing::error!(
        reason = why,
        ?postmaster,
        "fencing: killing every PostgreSQL process"
    );
    let left = fence::fence_instance(&guard.pgdata, postmaster).await;
    if left.is_empty() {
        state.lock().fence_pending = false;
        guard.disarm(state);
    } else {
        tracing::error!(
            processes = ?left,
            "fencing: processes of PostgreSQL survive SIGKILL; /healthz fails until they are gone"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::process::{Command, Stdio};

    use super::*;

    /// What a scripted lease round does.
    enum Answer {
        Held,
        Panic,
    }

    /// A lease that answers as scripted, then is not held.
    struct Scripted(VecDeque<Answer>);

    impl Rounds for Scripted {
        async fn renew(&mut self, _: &Intent) -> Result<Outcome, String> {
            match self.0.pop_front() {
                Some(Answer::Held) => Ok(Outcome::Held),
                Some(Answer::Panic) => panic!("a lease round panics"),
                None => Ok(Outcome::NotHeld),
            }
        }

        fn forget(&mut self) {}
    }

    /// A manager thawed after a freeze runs its convergence loop while its
    /// lease task may still be asleep, the last word on the channel still
    /// "held": past the fence deadline the lease task armed, `held` says
    /// no, so nothing is promoted or started writable on a lapsed lease.
    #[test]
    fn held_is_never_said_past_the_armed_fence_deadline() {
        let state = SharedState::default();
        let (held_tx, held) = watch::channel(true);
        let (follow_tx, follow) = watch::channel(Follow::Any);
        let (intent, _) = watch::channel(Intent::release(LeaseTiming::for_delay(0)));
        let primacy = Primacy {
            intent,
            held,
            follow,
            _always: Some((held_tx, follow_tx)),
            state: Some(state.clone()),
        };
        let now = std::time::Instant::now();
        state.lock().lease_deadline = Some(now + Duration::from_secs(60));
        assert!(primacy.held(), "held before the deadline");
        state.lock().lease_deadline = now.checked_sub(Duration::from_millis(1));
        assert!(!primacy.held(), "held past the fence deadline");
        // Not guarding (a standby holding nothing to fence): the channel's word.
        state.lock().lease_deadline = None;
        assert!(primacy.held());
    }

    #[tokio::test]
    async fn a_lease_task_that_panics_stops_holding_and_fences_the_primary() {
        // A stand-in for PostgreSQL running as primary under the lease.
        let pgdata = tempfile::tempdir().expect("temp dir");
        let mut postmaster = Command::new("sleep")
            .arg("60")
            .current_dir(pgdata.path())
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(postmaster.id()).expect("pid");
        let state = SharedState::default();
        {
            let mut state = state.lock();
            state.postmaster_pid = Some(pid);
            state.primary_pid = Some(pid);
        }
        // A 1 s lease: renewed every 200 ms, fenced 600 ms after a renewal.
        let timing = LeaseTiming::for_delay(1);
        let (intent, intent_rx) = watch::channel(Intent {
            hold: true,
            takeover: None,
            timing,
        });
        let (held_tx, mut held) = watch::channel(false);
        let script = Scripted(VecDeque::from([Answer::Held, Answer::Held, Answer::Panic]));
        let guard = Guard {
            pgdata: pgdata.path().to_owned(),
            watchdog: None,
        };
        let task = tokio::spawn(hold(script, intent_rx, held_tx, state.clone(), guard));
        let limit = Duration::from_secs(10);
        tokio::time::timeout(limit, held.wait_for(|held| *held))
            .await
            .expect("held within 10 s")
            .expect("the lease task runs");
        // The third round panics: not held any more, at once...
        tokio::time::timeout(limit, held.wait_for(|held| !*held))
            .await
            .expect("the panic lets go of the lease")
            .expect("the lease task runs");
        // ...and PostgreSQL is fenced, its exit a fence and not a crash.
        let status = tokio::task::spawn_blocking(move || postmaster.wait())
            .await
            .expect("joined")
            .expect("waited");
        assert!(!status.success(), "killed: {status}");
        let after = state.snapshot();
        assert!(after.lease_fenced, "{after:?}");
        assert_eq!(after.primary_pid, None);
        // The task is alive: it renews again (here: not held) until the
        // handle goes.
        assert!(!task.is_finished(), "supervised, not dead");
        drop(intent);
        tokio::time::timeout(limit, task)
            .await
            .expect("ends with its handle")
            .expect("no panic escapes");
    }
}
