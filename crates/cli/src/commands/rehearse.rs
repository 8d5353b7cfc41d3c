//! `tusk rehearse CLUSTER`: asks the operator for a restore rehearsal now
//! (the `tusk.dev/rehearse` annotation) and follows it until its outcome
//! is recorded in `status.lastRestoreVerification`.
//!
//! Exit codes: 0 the rehearsal passed (or was asked for, with `--wait
//! 0`), 1 it failed or the operator refused to start one (the reason is
//! printed), 2 the command could not run or the wait ended first.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use tusk_api::labels::REHEARSE;
use tusk_api::rehearsal::pod_name;
use tusk_api::v1alpha1::{PostgresCluster, RestoreVerification};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use super::status::time_text;
use crate::output::{Lines, outln};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// Seconds to follow the rehearsal (0: ask for it and return).
    #[arg(long, default_value_t = 3600)]
    pub wait: u64,
}

/// How often the cluster is read again while the rehearsal runs.
const POLL: Duration = Duration::from_secs(2);

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(rehearse(args))
}

/// One line saying what a rehearsal found.
pub fn describe(record: &RestoreVerification) -> String {
    let backup = if record.backup_id.is_empty() {
        "-"
    } else {
        &record.backup_id
    };
    let verdict = match (record.succeeded, record.failed_check.as_deref()) {
        (true, _) => "passed".to_owned(),
        (false, Some(check)) => format!("FAILED the {check} check"),
        (false, None) => "FAILED".to_owned(),
    };
    let took = record
        .duration_seconds
        .map_or_else(String::new, |s| format!(" in {s:.1} s"));
    let point = record
        .recovery_point
        .as_ref()
        .map_or_else(String::new, |p| {
            let at = p
                .time
                .as_ref()
                .map_or_else(String::new, |t| format!(", {}", time_text(t)));
            format!("; recovered to {}{at}", p.lsn)
        });
    format!(
        "rehearsal of backup {backup} {verdict}{took}{point}: {}",
        record.message.as_deref().unwrap_or("no message")
    )
}

/// Prints the recorded rehearsal; its exit code (1: it failed), read or
/// not.
fn verdict(record: &RestoreVerification) -> Result<ExitCode, CommandError> {
    Lines::default().line(format_args!("{}", describe(record)))?;
    Ok(ExitCode::from(if record.succeeded { 0 } else { 1 }))
}

/// The recorded rehearsal newer than `before`, if there is one.
fn newer(cluster: &PostgresCluster, before: Option<Timestamp>) -> Option<RestoreVerification> {
    let record = cluster.status.as_ref()?.last_restore_verification.clone()?;
    before.is_none_or(|b| record.time.0 > b).then_some(record)
}

async fn rehearse(args: &Args) -> Result<ExitCode, CommandError> {
    let target = Target::connect(args.at.namespace.as_deref()).await?;
    let name = &args.at.cluster;
    let cluster = target.cluster(name).await?;
    let before = newer(&cluster, None).map(|r| r.time.0);
    let patch =
        serde_json::json!({"metadata": {"annotations": {REHEARSE: Timestamp::now().to_string()}}});
    target
        .clusters()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(kubernetes)?;
    outln!("restore rehearsal of {name} asked for")?;
    if args.wait == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = Instant::now() + Duration::from_secs(args.wait);
    let mut started = false;
    while Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        let cluster = target.cluster(name).await?;
        if let Some(record) = newer(&cluster, before) {
            return verdict(&record);
        }
        let running = target
            .api::<Pod>()
            .get_opt(&pod_name(name))
            .await
            .map_err(kubernetes)?
            .is_some();
        if running && !started {
            outln!("running in pod {}", pod_name(name))?;
            started = true;
        }
        if !running && !started && !cluster.annotations().contains_key(REHEARSE) {
            // Taken without a pod seen: refused, unless it was over
            // between two looks (its record is written just after).
            tokio::time::sleep(POLL).await;
            if let Some(record) = newer(&target.cluster(name).await?, before) {
                return verdict(&record);
            }
            let refusal = refusal(&target, name).await?;
            Lines::default().line(format_args!("{refusal}"))?;
            return Ok(ExitCode::from(1));
        }
    }
    eprintln!(
        "the rehearsal of {name} has not finished after {} s; it goes on: kubectl get pgc {name} -n {} -o jsonpath='{{.status.lastRestoreVerification}}'",
        args.wait, target.namespace
    );
    Ok(ExitCode::from(2))
}

/// Why the operator took the request without starting a rehearsal: its
/// newest `RehearsalRefused` event about the cluster.
async fn refusal(target: &Target, name: &str) -> Result<String, CommandError> {
    let newest = target
        .events()
        .await?
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some("RehearsalRefused")
        })
        .max_by_key(|e| {
            e.last_timestamp
                .clone()
                .or(e.metadata.creation_timestamp.clone())
        });
    Ok(newest.and_then(|e| e.message).unwrap_or_else(|| {
        "the operator removed the request without starting a rehearsal".to_owned()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use tusk_api::v1alpha1::RecoveryPoint;

    fn time(text: &str) -> Time {
        Time(text.parse().expect("a time"))
    }

    #[test]
    fn a_rehearsal_reads_as_one_line() {
        let passed = RestoreVerification {
            time: time("2026-12-04T21:08:12Z"),
            backup_id: "20261204-210616F".into(),
            succeeded: true,
            duration_seconds: Some(51.03),
            recovery_point: Some(RecoveryPoint {
                lsn: "0/9000000".into(),
                time: Some(time("2026-12-04T21:07:21Z")),
            }),
            failed_check: None,
            message: Some("restored; sentinel present".into()),
        };
        assert_eq!(
            describe(&passed),
            "rehearsal of backup 20261204-210616F passed in 51.0 s; recovered to 0/9000000, 2026-12-04T21:07:21Z: restored; sentinel present"
        );
        let failed = RestoreVerification {
            succeeded: false,
            failed_check: Some("restore".into()),
            recovery_point: None,
            duration_seconds: None,
            message: Some("zst error".into()),
            ..passed
        };
        assert_eq!(
            describe(&failed),
            "rehearsal of backup 20261204-210616F FAILED the restore check: zst error"
        );
    }
}
