//! What to do with the primary lease next, decided purely from what the
//! manager wants, the lease as last read and how long its version has
//! stood unchanged.

use std::time::Duration;

use tusk_api::primacy::LeaseTiming;

/// What the convergence loop asks of the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    /// Hold the lease: PostgreSQL runs, or is about to run, as primary.
    pub hold: bool,
    /// `status.primaryLeaseTakeover`: the version the operator found
    /// expired when it chose this instance.
    pub takeover: Option<String>,
    /// The timing to hold the lease with.
    pub timing: LeaseTiming,
}

impl Intent {
    pub fn release(timing: LeaseTiming) -> Self {
        Intent {
            hold: false,
            takeover: None,
            timing,
        }
    }
}

/// The lease as read from the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// `metadata.resourceVersion`.
    pub version: String,
    /// `spec.holderIdentity`; `None` or empty when released.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds` the holder wrote.
    pub duration: Duration,
    /// How long this manager has seen this version unchanged.
    pub unchanged_for: Duration,
}

/// The next request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No lease exists: create it, held by this instance.
    Create,
    /// Write this instance as holder with a fresh renew time, at this
    /// version (a renewal, or an acquisition of a free or expired lease).
    Write { version: String, acquire: bool },
    /// Give the lease up (holder cleared) at this version.
    Release { version: String },
    /// Another instance holds a lease that has not expired: wait.
    Wait,
    /// Nothing to do.
    Idle,
}

/// The step for instance `me`.
pub fn decide(me: &str, intent: &Intent, seen: Option<&Seen>) -> Step {
    let Some(seen) = seen else {
        return if intent.hold {
            Step::Create
        } else {
            Step::Idle
        };
    };
    let holder = seen.holder.as_deref().filter(|h| !h.is_empty());
    let mine = holder == Some(me);
    if !intent.hold {
        return if mine {
            Step::Release {
                version: seen.version.clone(),
            }
        } else {
            Step::Idle
        };
    }
    let free = holder.is_none()
        || intent.takeover.as_deref() == Some(seen.version.as_str())
        || seen.unchanged_for >= seen.duration;
    if mine || free {
        Step::Write {
            version: seen.version.clone(),
            acquire: !mine,
        }
    } else {
        Step::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(hold: bool, takeover: Option<&str>) -> Intent {
        Intent {
            hold,
            takeover: takeover.map(str::to_owned),
            timing: LeaseTiming::for_delay(5),
        }
    }

    fn seen(holder: Option<&str>, version: &str, unchanged: u64) -> Seen {
        Seen {
            version: version.to_owned(),
            holder: holder.map(str::to_owned),
            duration: Duration::from_secs(5),
            unchanged_for: Duration::from_secs(unchanged),
        }
    }

    fn write(version: &str, acquire: bool) -> Step {
        Step::Write {
            version: version.to_owned(),
            acquire,
        }
    }

    #[test]
    fn every_situation_has_one_step() {
        let cases = [
            // (wants, takeover, lease, expected)
            (true, None, None, Step::Create),
            (false, None, None, Step::Idle),
            (
                true,
                None,
                Some(seen(Some("db-1"), "7", 0)),
                write("7", false),
            ),
            (
                false,
                None,
                Some(seen(Some("db-1"), "7", 0)),
                Step::Release {
                    version: "7".into(),
                },
            ),
            (true, None, Some(seen(None, "7", 0)), write("7", true)),
            (true, None, Some(seen(Some(""), "7", 0)), write("7", true)),
            // Another holder: wait, unless the operator found this very
            // version expired, or this manager watched it stand a whole
            // lease duration.
            (true, None, Some(seen(Some("db-2"), "7", 1)), Step::Wait),
            (
                true,
                Some("6"),
                Some(seen(Some("db-2"), "7", 1)),
                Step::Wait,
            ),
            (
                true,
                Some("7"),
                Some(seen(Some("db-2"), "7", 0)),
                write("7", true),
            ),
            (
                true,
                None,
                Some(seen(Some("db-2"), "7", 5)),
                write("7", true),
            ),
            (false, None, Some(seen(Some("db-2"), "7", 9)), Step::Idle),
        ];
        for (hold, takeover, lease, expected) in cases {
            let step = decide("db-1", &intent(hold, takeover), lease.as_ref());
            assert_eq!(
                step, expected,
                "hold {hold}, takeover {takeover:?}, {lease:?}"
            );
        }
    }
}
