//! The watchdog's decisions, purely from the heartbeat it read, the time
//! on the shared clock, whether the manager is still its parent, and the
//! deadline it last fenced at.

use std::time::Duration;

/// How often a watchdog with nothing to guard looks at the heartbeat
/// again (to see it armed, or its manager gone); an armed one also wakes
/// this often before its deadline.
pub const POLL: Duration = Duration::from_millis(100);

/// What the manager last wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// No lease held: nothing to fence.
    Disarmed,
    /// The lease is held until this time on the shared clock
    /// (`CLOCK_BOOTTIME`, from boot): past it, PostgreSQL must not run.
    Until(Duration),
}

/// What the watchdog does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Read the heartbeat again after this long.
    Sleep(Duration),
    /// Kill every PostgreSQL process of the instance, for the lapse of the
    /// lease held until this deadline.
    Fence(Duration),
    /// Nothing left to guard: the manager is gone and nothing is armed.
    Exit,
}

/// The next step. `heartbeat` is `None` when it could not be read whole
/// (being rewritten): read again soon. `fenced` is the deadline of the
/// last fence: a deadline fences once, so that a standby the manager
/// starts after the fence is not killed for the same lapse.
pub fn next(
    heartbeat: Option<Heartbeat>,
    now: Duration,
    manager_gone: bool,
    fenced: Option<Duration>,
) -> Next {
    let Some(heartbeat) = heartbeat else {
        return Next::Sleep(Duration::from_millis(1));
    };
    match heartbeat {
        Heartbeat::Until(deadline) if fenced == Some(deadline) => {
            if manager_gone {
                Next::Exit
            } else {
                Next::Sleep(POLL)
            }
        }
        Heartbeat::Until(deadline) if now >= deadline => Next::Fence(deadline),
        Heartbeat::Until(deadline) => Next::Sleep((deadline - now).min(POLL)),
        Heartbeat::Disarmed if manager_gone => Next::Exit,
        Heartbeat::Disarmed => Next::Sleep(POLL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn every_situation_has_one_step() {
        let until = |n| Some(Heartbeat::Until(ms(n)));
        let cases = [
            // (heartbeat, now, manager gone, fenced at, expected)
            // Nothing held: wait for an arming, or leave with the manager.
            (Some(Heartbeat::Disarmed), 0, false, None, Next::Sleep(POLL)),
            (Some(Heartbeat::Disarmed), 0, true, None, Next::Exit),
            // Held: sleep to the deadline, never longer than a poll.
            (until(1_000), 950, false, None, Next::Sleep(ms(50))),
            (until(1_000), 0, false, None, Next::Sleep(POLL)),
            // Past the deadline: fence, whether or not the manager lives
            // (hung, or killed: its last deadline still stands).
            (until(1_000), 1_000, false, None, Next::Fence(ms(1_000))),
            (until(1_000), 5_000, true, None, Next::Fence(ms(1_000))),
            // A fence of an earlier lapse does not cover a later one.
            (
                until(2_000),
                2_500,
                false,
                Some(ms(1_000)),
                Next::Fence(ms(2_000)),
            ),
            // Renewed after a fence: held again until the new deadline.
            (
                until(2_000),
                1_500,
                false,
                Some(ms(1_000)),
                Next::Sleep(POLL),
            ),
            // Fenced for this lapse already: once is enough; a manager
            // gone leaves nothing to guard.
            (
                until(1_000),
                3_000,
                false,
                Some(ms(1_000)),
                Next::Sleep(POLL),
            ),
            (until(1_000), 3_000, true, Some(ms(1_000)), Next::Exit),
            // Read while being rewritten: read again at once.
            (None, 3_000, false, None, Next::Sleep(ms(1))),
        ];
        for (heartbeat, now, gone, fenced, expected) in cases {
            assert_eq!(
                next(heartbeat, ms(now), gone, fenced),
                expected,
                "{heartbeat:?} at {now} ms, manager gone {gone}, fenced {fenced:?}"
            );
        }
    }
}
