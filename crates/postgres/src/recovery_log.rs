//! How an archive recovery ended, as PostgreSQL's log says it: a recovery
//! to a target that lies past the archived WAL replays all there is, logs
//! when the last transaction it replayed committed, then stops with
//! `FATAL: recovery ended before configured recovery target was reached`.
//! [`RecoveryLog`] gathers those two lines from the postmaster's output,
//! and [`RecoveryLog::target_past_archive`] says so in words a person can
//! act on: the newest time the archive reaches, and what to do.

/// The words every explanation of a target past the archive starts with;
/// the operator recognises an instance's error by them.
pub const TARGET_PAST_ARCHIVE: &str = "the recovery target lies past the archived WAL";

const TARGET_UNREACHED: &str = "recovery ended before configured recovery target was reached";
const LAST_TRANSACTION: &str = "last completed transaction was at log time ";

/// What the log of one recovery said about its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryLog {
    /// When the last transaction replayed committed (PostgreSQL's words).
    pub last_transaction: Option<String>,
    /// Recovery ran out of WAL before its target.
    pub target_unreached: bool,
}

impl RecoveryLog {
    /// Takes in one log message (without PostgreSQL's line prefix).
    pub fn observe(&mut self, message: &str) {
        if let Some(at) = message.split(LAST_TRANSACTION).nth(1) {
            self.last_transaction = Some(at.trim().to_owned());
        }
        if message.contains(TARGET_UNREACHED) {
            self.target_unreached = true;
        }
    }

    /// Why a recovery to `target` (as the spec wrote it) did not end, when
    /// it ran out of archived WAL; `None` otherwise.
    pub fn target_past_archive(&self, target: &str) -> Option<String> {
        if !self.target_unreached {
            return None;
        }
        let newest = match &self.last_transaction {
            Some(at) => format!("The newest transaction in the archive committed at {at}."),
            None => "The archive holds no transaction after the backup.".to_owned(),
        };
        // One sentence per fact, no semicolon: the operator quotes it
        // from a list of reasons joined by semicolons.
        Some(format!(
            "{TARGET_PAST_ARCHIVE}: recovery to {target} replayed every archived segment and \
             stopped short. {newest} Set spec.bootstrap.recovery's target at or before that \
             time and create the cluster again, or, while the source cluster still runs, wait \
             until its WAL past the target is archived (docs/runbook.md, \
             \"Recovery target past the archived WAL\")."
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_past_the_archive_is_told_with_the_newest_time() {
        let mut log = RecoveryLog::default();
        for message in [
            "starting point-in-time recovery to 2030-01-01 00:00:00+00",
            "redo done at 0/5000110 system usage: CPU: user: 0.00 s",
            "last completed transaction was at log time 2026-12-07 21:40:01.123456+00",
        ] {
            log.observe(message);
        }
        assert_eq!(log.target_past_archive("time 2030-01-01T00:00:00Z"), None);
        log.observe("recovery ended before configured recovery target was reached");
        let told = log
            .target_past_archive("time 2030-01-01T00:00:00Z")
            .expect("told");
        assert!(told.starts_with(TARGET_PAST_ARCHIVE), "{told}");
        assert!(told.contains("2026-12-07 21:40:01.123456+00"), "{told}");
        assert!(told.contains("2030-01-01T00:00:00Z"), "{told}");
    }
}
