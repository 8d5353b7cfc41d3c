//! The backup side of status: WAL archiving's condition and
//! `status.backup`, base backups' progress, and restore rehearsals'
//! record and condition.

use tusk_api::conditions::{self, DesiredCondition};
use tusk_api::v1alpha1::{BackupStatus, PostgresClusterStatus};

use super::{StatusInput, set};

/// `status.lastRestoreVerification`, and the `RestoreRehearsed` and
/// `LastBackupRecent` conditions.
pub(super) fn set_rehearsed(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    if let Some(record) = &input.rehearsal {
        status.last_restore_verification = Some(record.clone());
    }
    set_judged(
        status,
        tusk_api::conditions::RESTORE_REHEARSED,
        &input.rehearsal_condition,
        input,
    );
    set_judged(
        status,
        tusk_api::conditions::LAST_BACKUP_RECENT,
        &input.backup_condition,
        input,
    );
}

/// `status.backup`'s base backup fields, from the pass's decisions.
pub(super) fn set_backups(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    let Some(progress) = &input.backups else {
        return;
    };
    let unchanged =
        progress.running.is_none() && progress.completed.is_none() && progress.scheduled.is_none();
    if unchanged && status.backup.as_ref().is_none_or(|b| b.running.is_none()) {
        return;
    }
    let backup = status.backup.get_or_insert_with(BackupStatus::default);
    backup.running.clone_from(&progress.running);
    if let Some((id, at)) = &progress.completed {
        backup.last_successful_backup = Some(id.clone());
        backup.last_successful_backup_time = Some(at.clone());
    }
    if let Some(slot) = &progress.scheduled {
        backup.last_scheduled_backup = Some(slot.clone());
    }
}

/// WAL archiving's condition and `status.backup`, from the target
/// primary's report, where the cluster archives.
pub(super) fn set_archiving(status: &mut PostgresClusterStatus, input: &StatusInput<'_>) {
    let Some(target) = &input.archive else {
        return;
    };
    let primary = input
        .target_primary
        .as_ref()
        .and_then(|name| input.reports.get(name));
    crate::archiving::apply(
        status,
        target.as_ref(),
        primary,
        input.generation,
        &input.now,
    );
}

/// Sets condition `type_` as judged, removes it when it no longer applies,
/// or keeps it when the pass did not judge it.
pub(super) fn set_judged(
    status: &mut PostgresClusterStatus,
    type_: &str,
    judged: &Option<Option<super::Judgement>>,
    input: &StatusInput<'_>,
) {
    match judged {
        None => {}
        Some(None) => {
            conditions::remove_condition(&mut status.conditions, type_);
        }
        Some(Some((state, reason, message))) => {
            let condition = DesiredCondition {
                type_,
                status: *state,
                reason,
                message,
            };
            set(status, &condition, input);
        }
    }
}
