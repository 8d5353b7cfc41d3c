//! `tusk status CLUSTER [-o json]`: a cluster on one screen: phase,
//! conditions, primary (current and target), every instance (role,
//! readiness, timeline, WAL position, lag), the last failover, backups and
//! the last restore rehearsal, all from the PostgresCluster's status, with
//! each pod's own Ready condition beside what the operator reported.
//!
//! `-o json` prints [`Report`], a stable document: fields are only added,
//! never renamed or removed.

use std::process::ExitCode;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde::Serialize;
use tusk_api::fencing::Fencing;
use tusk_api::v1alpha1::{
    BackupStatus, PostgresCluster, RestoreVerification, RoleState, RoleStatus, SchedulingReason,
    Unscheduled, UpgradeStatus,
};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, pod_ready, table};
use crate::output::{out, outln};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    /// Prints `document` as JSON, or as `text` renders it.
    pub fn print<T: Serialize>(
        self,
        document: &T,
        text: impl FnOnce(&T) -> String,
    ) -> Result<(), CommandError> {
        match self {
            Self::Json => outln!(
                "{}",
                serde_json::to_string_pretty(document)
                    .map_err(|e| CommandError::Kubernetes(e.to_string()))?
            ),
            Self::Text => out!("{}", text(document)),
        }
    }
}

/// The `-o json` document.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub cluster: String,
    pub namespace: String,
    pub phase: Option<String>,
    pub instances_declared: i32,
    pub ready_instances: i32,
    pub primary: Primary,
    pub conditions: Vec<ConditionLine>,
    /// The primary first, then by serial.
    pub instances: Vec<InstanceLine>,
    pub last_failover: Option<FailoverLine>,
    pub upgrade: Option<UpgradeStatus>,
    pub backup: Option<BackupStatus>,
    pub last_restore_verification: Option<RestoreVerification>,
    /// The declared spec is refused and the operator keeps the cluster as
    /// an earlier, valid one declares it: which generations.
    pub kept_spec: Option<KeptSpec>,
    /// The declared roles as the primary last reported them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleStatus>,
}

/// A refused generation of the spec, and the valid one kept instead.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KeptSpec {
    pub refused_generation: i64,
    pub kept_generation: i64,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Primary {
    pub current: Option<String>,
    pub target: Option<String>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceLine {
    pub name: String,
    pub role: String,
    /// Ready as the operator last observed it.
    pub ready: bool,
    /// The pod's Ready condition; `None` when there is no pod.
    pub pod_ready: Option<bool>,
    /// Named in the `tusk.dev/fenced-instances` annotation (or `*`).
    pub fenced: bool,
    pub timeline: Option<i64>,
    pub lsn: Option<String>,
    pub lag_bytes: Option<i64>,
    pub sync_state: Option<String>,
    /// Why its pod waits for a node, while it does.
    pub unscheduled: Option<Unscheduled>,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailoverLine {
    pub time: String,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub lsn_gap_bytes: i64,
    pub duration_seconds: Option<f64>,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        let cluster = target.cluster(&args.at.cluster).await?;
        let pods = target.pods(&args.at.cluster).await?;
        args.output.print(&report(&cluster, &pods), render)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// RFC 3339, as the API writes it (a `MicroTime` with its microseconds).
pub fn time_text(time: &impl Serialize) -> String {
    serde_json::to_value(time)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The report of `cluster` and its `pods`.
pub fn report(cluster: &PostgresCluster, pods: &[Pod]) -> Report {
    let status = cluster.status.clone().unwrap_or_default();
    let fencing = Fencing::parse(
        cluster
            .annotations()
            .get(tusk_api::labels::FENCED_INSTANCES)
            .map(String::as_str),
    )
    .unwrap_or_default();
    let pod_ready_of = |name: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .map(pod_ready)
    };
    let mut ordered: Vec<&tusk_api::v1alpha1::InstanceStatus> = status.instances.iter().collect();
    // The primary first, then by serial (`db-2` before `db-10`).
    ordered.sort_by_key(|i| {
        (
            i.role != tusk_api::labels::role::PRIMARY,
            i.name.len(),
            i.name.clone(),
        )
    });
    let instances = ordered
        .into_iter()
        .map(|i| InstanceLine {
            name: i.name.clone(),
            role: i.role.clone(),
            ready: i.ready,
            pod_ready: pod_ready_of(&i.name),
            fenced: fencing.covers(&i.name),
            timeline: i.timeline,
            lsn: i.lsn.clone(),
            lag_bytes: i.lag_bytes,
            sync_state: i.sync_state.clone(),
            unscheduled: i.unscheduled.clone(),
        })
        .collect();
    Report {
        cluster: cluster.name_any(),
        namespace: cluster.namespace().unwrap_or_default(),
        phase: status.phase.map(|p| p.as_str().to_owned()),
        instances_declared: cluster.spec.instances,
        ready_instances: status.ready_instances,
        primary: Primary {
            current: status.current_primary.clone(),
            target: status.target_primary.clone(),
        },
        conditions: status
            .conditions
            .iter()
            .map(|c| ConditionLine {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
        instances,
        last_failover: status.last_failover.as_ref().map(|f| FailoverLine {
            time: time_text(&f.time),
            from: f.from.clone(),
            to: f.to.clone(),
            reason: f.reason.clone(),
            lsn_gap_bytes: f.lsn_gap_bytes,
            duration_seconds: f.duration_seconds,
        }),
        upgrade: status.upgrade.clone(),
        backup: status.backup.clone(),
        last_restore_verification: status.last_restore_verification.clone(),
        kept_spec: kept_spec(cluster),
        roles: status.roles.clone(),
    }
}

/// The spec kept while the declared one is refused: the record of the
/// last valid spec is older than the generation the operator observed.
fn kept_spec(cluster: &PostgresCluster) -> Option<KeptSpec> {
    let status = cluster.status.as_ref()?;
    let kept = status.last_valid_spec.as_ref()?.generation;
    let observed = status.observed_generation?;
    (observed > kept).then_some(KeptSpec {
        refused_generation: observed,
        kept_generation: kept,
    })
}

fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn yes_no(value: bool) -> String {
    if value { "yes" } else { "no" }.to_owned()
}

/// The one-screen text of `report`.
pub fn render(report: &Report) -> String {
    let mut out = format!(
        "Cluster     {}/{}\nPhase       {}  ({}/{} instances ready)\nPrimary     {} (target {})\n",
        report.namespace,
        report.cluster,
        report.phase.as_deref().unwrap_or("(no status yet)"),
        report.ready_instances,
        report.instances_declared,
        or_dash(report.primary.current.as_deref()),
        or_dash(report.primary.target.as_deref()),
    );
    if let Some(kept) = &report.kept_spec {
        out.push_str(&format!(
            "Spec        generation {} refused: kept as generation {} declares it (see Degraded)\n",
            kept.refused_generation, kept.kept_generation
        ));
    }
    out.push_str("\nConditions\n");
    let mut rows = vec![
        ["TYPE", "STATUS", "REASON", "MESSAGE"]
            .map(str::to_owned)
            .to_vec(),
    ];
    rows.extend(report.conditions.iter().map(|c| {
        vec![
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        ]
    }));
    out.push_str(&table(&rows, "  "));
    out.push_str("\nInstances\n");
    out.push_str(&instances_table(&report.instances));
    out.push_str(&render_history(report));
    out
}

fn instances_table(instances: &[InstanceLine]) -> String {
    let mut rows = vec![
        [
            "NAME", "ROLE", "READY", "POD", "TIMELINE", "LSN", "LAG", "SYNC", "FENCED",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    rows.extend(instances.iter().map(|i| {
        vec![
            i.name.clone(),
            i.role.clone(),
            yes_no(i.ready),
            match (i.pod_ready, &i.unscheduled) {
                (Some(true), _) => "ready".to_owned(),
                (_, Some(waiting)) => match waiting.reason {
                    SchedulingReason::Unschedulable => "unschedulable".to_owned(),
                    SchedulingReason::NotScheduledYet => "not scheduled".to_owned(),
                },
                (Some(false), None) => "not ready".to_owned(),
                (None, None) => "missing".to_owned(),
            },
            or_dash(i.timeline),
            or_dash(i.lsn.as_deref()),
            i.lag_bytes
                .map_or_else(|| "-".to_owned(), |b| format!("{b} B")),
            or_dash(i.sync_state.as_deref()),
            if i.fenced { "fenced" } else { "-" }.to_owned(),
        ]
    }));
    let mut out = table(&rows, "  ");
    for i in instances {
        if let Some(waiting) = &i.unscheduled {
            out.push_str(&format!(
                "{} waits for a node ({}): {}\n",
                i.name, waiting.reason, waiting.message
            ));
        }
    }
    out
}

fn render_history(report: &Report) -> String {
    let mut out = String::new();
    out.push_str("\nLast failover  ");
    match &report.last_failover {
        None => out.push_str("none\n"),
        Some(f) => out.push_str(&format!(
            "{} {} -> {} ({}, gap {} B{})\n",
            f.time,
            f.from,
            f.to,
            f.reason,
            f.lsn_gap_bytes,
            f.duration_seconds
                .map(|s| format!(", {s:.1} s"))
                .unwrap_or_default()
        )),
    }
    if let Some(upgrade) = &report.upgrade {
        out.push_str(&format!(
            "Upgrade        {} -> {}: {}{}\n",
            upgrade.from_version,
            upgrade.to_version,
            upgrade.step,
            upgrade
                .message
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    if let Some(backup) = &report.backup {
        out.push_str(&format!(
            "Backups        last {} at {}; WAL archived {} at {}{}\n",
            or_dash(backup.last_successful_backup.as_deref()),
            or_dash(backup.last_successful_backup_time.as_ref().map(time_text)),
            or_dash(backup.last_archived_wal.as_deref()),
            or_dash(backup.last_archived_wal_time.as_ref().map(time_text)),
            backup
                .last_failed_archive
                .as_ref()
                .map(|f| format!("; archiving FAILING: {f}"))
                .unwrap_or_default()
        ));
    }
    if !report.roles.is_empty() {
        out.push_str(&roles_line(&report.roles));
    }
    if let Some(rehearsal) = &report.last_restore_verification {
        out.push_str(&format!(
            "Rehearsal      {} of {} at {}{}\n",
            match (rehearsal.succeeded, rehearsal.failed_check.as_deref()) {
                (true, _) => "passed".to_owned(),
                (false, Some(check)) => format!("FAILED ({check} check)"),
                (false, None) => "FAILED".to_owned(),
            },
            if rehearsal.backup_id.is_empty() {
                "-"
            } else {
                &rehearsal.backup_id
            },
            time_text(&rehearsal.time),
            rehearsal
                .message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// `Roles` with how many are as declared, and each failed one with why.
fn roles_line(roles: &[RoleStatus]) -> String {
    let failed: Vec<String> = roles
        .iter()
        .filter(|r| r.state == RoleState::Failed)
        .map(|r| {
            format!(
                "{} FAILED: {}",
                r.name,
                r.reason.as_deref().unwrap_or("(no reason reported)")
            )
        })
        .collect();
    let reconciled = roles.len() - failed.len();
    let mut line = format!("Roles          {reconciled}/{} as declared", roles.len());
    for failure in failed {
        line.push_str("; ");
        line.push_str(&failure);
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests;
