//! Fencing a primary whose lease lapsed, whatever else hangs.
//!
//! The primary's manager renews the primary lease (`crate::primacy`);
//! when a renewal fails to come in time, every PostgreSQL process of the
//! instance must be dead before the operator can promote another
//! instance. Two parties see to it, each alone enough:
//! - the manager's lease task ([`fence_instance`]), while it runs; and
//! - the **watchdog** ([`watchdog`]), a process of its own
//!   (`tusk instance watchdog`) that shares no runtime, lock or memory
//!   with the manager but one 16-byte [`heartbeat`]: after every renewal
//!   the manager writes there the moment the lease's fence time runs out.
//!   Past it, unless a newer deadline came, the watchdog kills every
//!   PostgreSQL process of the instance ([`processes`]): the postmaster
//!   and every backend, since backends are not in the postmaster's process
//!   group. It holds when the manager hangs (a stalled runtime, a
//!   deadlock, SIGSTOP), when it was killed (the last deadline stands),
//!   and when the postmaster hangs (SIGKILL needs nothing of it).
//!
//! Which processes are "the instance manager": the `tusk instance run`
//! process. The watchdog runs beside it in a process group of its own, as
//! the PostgreSQL user, blocking termination signals; a fault that stops
//! or kills the manager (or its process group) leaves the watchdog
//! running. A fault that stops the whole pod stops PostgreSQL's backends
//! as well, so they acknowledge nothing while it lasts.
//!
//! What this does not cover, where only the standbys' withheld
//! confirmations (`crate::primacy::view`, `dataDurability: required`)
//! keep the old primary from acknowledging: the watchdog stopped together
//! with the manager while the backends run on; and a whole pod thawed
//! after a promotion elsewhere, where a backend may commit a client's
//! pending statement in the milliseconds before the thawed watchdog kills
//! it.
//!
//! # Timing
//! With `t0` the moment the last successful renewal was *sent* (on the
//! manager's clock), and the lease timing of `tusk_api::primacy`:
//!
//! | `delaySeconds` | lease `duration` | renewed every | fence at `t0 +` |
//! |---|---|---|---|
//! | 0, 1 | 1 s | 200 ms | 600 ms |
//! | 5 | 5 s | 1 s | 3 s |
//! | 15 and more | 15 s | 3 s | 9 s |
//!
//! - The watchdog fences at `t0 + fence_after` (it sleeps to the
//!   deadline, waking at least every 100 ms to read a newer one), then
//!   scans `/proc` and sends SIGKILL: a few milliseconds, say 100 ms on a
//!   loaded machine. A process that has taken SIGKILL runs no more code.
//! - The operator cannot see the renewal sent at `t0` before `t0`, and
//!   takes over only once it has seen that version of the lease unrenewed
//!   for `duration` on its own clock: not before `t0 + duration`. Then
//!   the chosen standby still has to take the lease over and promote
//!   (hundreds of milliseconds more, not counted here).
//! - So at `delaySeconds` 1, PostgreSQL is dead by `t0 + 700 ms` against
//!   a takeover no earlier than `t0 + 1000 ms`: a margin of 300 ms, which
//!   also covers the two clocks running at rates up to 1000/700 = 1.43
//!   apart (quartz clocks differ by 0.01 %). At 5 s: 3.1 s against 5 s
//!   (a rate ratio of 1.6).
//! - A slow API server only makes the margin larger: the deadline counts
//!   from when a renewal was sent, however late its answer arrives, and
//!   the operator starts counting only when it has read the new version.
//!   An answer that arrives after the deadline has passed extends
//!   nothing. What a slow API server costs is availability: a primary
//!   whose renewals are unanswered for `fence_after` is fenced.
//!
//! The fence is reported done ([`crate::state::ManagerState::fence_pending`]
//! cleared, `/healthz` answering again) only when no process of the
//! instance is left.

pub mod decide;
pub mod feed;
pub mod heartbeat;
pub mod processes;
pub mod watchdog;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

pub use feed::Watchdog;

/// How long the manager goes on killing before it reports what survives.
const FENCE_LIMIT: Duration = Duration::from_secs(2);

/// Kills every process of the instance whose data directory is `pgdata`
/// (with `postmaster` and its descendants, when known), until none is
/// left or [`FENCE_LIMIT`] has passed; returns those left.
pub async fn fence_instance(pgdata: &Path, postmaster: Option<i32>) -> BTreeSet<i32> {
    let started = Instant::now();
    let mut known = BTreeSet::new();
    loop {
        let round = processes::sweep(pgdata, postmaster, &known);
        if round.is_empty() {
            return round;
        }
        if started.elapsed() >= FENCE_LIMIT {
            tokio::time::sleep(Duration::from_millis(2)).await;
            return processes::still_alive(&round);
        }
        known = round;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// True while any process of the instance runs.
pub fn instance_running(pgdata: &Path, postmaster: Option<i32>) -> bool {
    !processes::of_instance(pgdata, postmaster).is_empty()
}
