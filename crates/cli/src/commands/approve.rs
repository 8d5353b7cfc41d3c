//! `tusk approve CLUSTER`: what awaits a person's approval, and the
//! approval of exactly that, named.
//!
//! - `tusk approve CLUSTER` lists it: a failover `dataDurability:
//!   required` blocked (its identity, the failed primary, the standby an
//!   approval promotes and the bytes it may lose), the major version
//!   approved for an upgrade, and an upgrade waiting for a recent backup
//!   (with the command for one and the override).
//! - `tusk approve CLUSTER failover ID` approves the blocked failover
//!   whose identity is ID, as `tusk promote TO --accept-data-loss` does,
//!   then waits for the promotion. Any other ID is refused, naming the
//!   identity the blocked decision has now: a decision changes identity
//!   when its standby or its gap changes, and an approval never carries
//!   over to a decision nobody saw.
//! - `tusk approve CLUSTER upgrade VERSION` sets
//!   `spec.upgrade.approvedVersion`, which a change of
//!   `spec.postgres.version` must match (admission refuses it otherwise).
//!
//! Exit codes: 0 done or nothing awaits, 1 refused, 2 the command could
//! not run.

use std::process::ExitCode;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use tusk_api::v1alpha1::{BlockedFailover, PostgresCluster};
use tusk_operator::switchover::{self, Progress, Requested};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    #[command(subcommand)]
    pub what: Option<What>,
    /// Seconds to wait for an approved failover's promotion (0: do not
    /// wait).
    #[arg(long, default_value_t = 120)]
    pub wait: u64,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// Approve the blocked failover whose identity is ID (see
    /// `status.failover.blocked.id`), accepting the loss it names.
    Failover {
        /// The blocked decision's identity.
        id: String,
    },
    /// Approve upgrading to the major VERSION (`spec.upgrade.approvedVersion`).
    Upgrade {
        /// The major version, e.g. 16.
        version: i32,
    },
}

/// The failover `dataDurability: required` blocked, if any.
fn blocked_failover(cluster: &PostgresCluster) -> Option<&BlockedFailover> {
    cluster.status.as_ref()?.failover.as_ref()?.blocked.as_ref()
}

/// One line per thing awaiting approval, with the command that approves it.
pub fn pending(cluster: &PostgresCluster) -> Vec<String> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let mut lines = Vec::new();
    if let Some(b) = blocked_failover(cluster) {
        lines.push(format!(
            "failover {}: promoting {} in place of {} may lose up to {} bytes of acknowledged WAL; \
             approve with: kubectl tusk approve {name} failover {}",
            b.id, b.to, b.from, b.lsn_gap_bytes, b.id
        ));
    }
    let declared = cluster.spec.postgres.version;
    let approved = cluster
        .spec
        .upgrade
        .as_ref()
        .and_then(|u| u.approved_version);
    match approved {
        Some(version) if version > declared => lines.push(format!(
            "upgrade to PostgreSQL {version}: approved; set spec.postgres.version to {version} to start it"
        )),
        _ => {}
    }
    lines.extend(waiting_for_backup(cluster));
    lines
}

/// A started upgrade that waits for a recent backup, with both ways on.
fn waiting_for_backup(cluster: &PostgresCluster) -> Option<String> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let upgrade = cluster.status.as_ref()?.upgrade.as_ref()?;
    if upgrade.step != "WaitingForBackup" || upgrade.to_version != cluster.spec.postgres.version {
        return None;
    }
    let version = upgrade.to_version;
    Some(format!(
        "upgrade to PostgreSQL {version}: waits for a base backup newer than \
         spec.upgrade.backupMaxAgeHours; take one with: kubectl tusk backup {name}; or upgrade \
         without one with: kubectl annotate pgc {name} {}={version}",
        tusk_api::labels::UPGRADE_WITHOUT_BACKUP
    ))
}

/// The blocked failover `id` approves: its decision, or why it approves
/// nothing.
pub fn judge_failover<'a>(
    cluster: &'a PostgresCluster,
    id: &str,
) -> Result<&'a BlockedFailover, String> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let blocked = blocked_failover(cluster)
        .ok_or_else(|| format!("no failover of {name} is blocked: there is nothing to approve"))?;
    if blocked.id != id {
        return Err(format!(
            "{id} is not the blocked failover of {name}: it is {} (promoting {} in place of {}, \
             up to {} bytes lost); approve that one by its identity if you accept it",
            blocked.id, blocked.to, blocked.from, blocked.lsn_gap_bytes
        ));
    }
    Ok(blocked)
}

/// Why approving `version` makes no sense for a cluster at `declared`.
pub fn judge_upgrade(declared: i32, version: i32) -> Option<String> {
    (version <= declared).then(|| {
        format!(
            "the cluster runs PostgreSQL {declared}; an upgrade goes to a later major version, \
             not {version}"
        )
    })
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(approve(args))
}

async fn approve(args: &Args) -> Result<ExitCode, CommandError> {
    let target = Target::connect(args.at.namespace.as_deref()).await?;
    let name = &args.at.cluster;
    let cluster = target.cluster(name).await?;
    match &args.what {
        None => {
            let lines = pending(&cluster);
            if lines.is_empty() {
                outln!("nothing of {name} awaits approval")?;
            }
            for line in lines {
                outln!("{line}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(What::Failover { id }) => match judge_failover(&cluster, id) {
            Ok(blocked) => approve_failover(&target, name, blocked, args.wait).await,
            Err(refusal) => {
                eprintln!("refused: {refusal}");
                Ok(ExitCode::from(1))
            }
        },
        Some(What::Upgrade { version }) => {
            if let Some(refusal) = judge_upgrade(cluster.spec.postgres.version, *version) {
                eprintln!("refused: {refusal}");
                return Ok(ExitCode::from(1));
            }
            let patch = serde_json::json!({"spec": {"upgrade": {"approvedVersion": version}}});
            target
                .clusters()
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(kubernetes)?;
            outln!(
                "approved: spec.upgrade.approvedVersion={version} on {}/{name}; set spec.postgres.version to {version} to start it",
                target.namespace
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes the approval of `blocked` and waits (at most `wait` seconds)
/// for its standby to serve as the primary.
async fn approve_failover(
    target: &Target,
    name: &str,
    blocked: &BlockedFailover,
    wait: u64,
) -> Result<ExitCode, CommandError> {
    let api = target.clusters();
    let requested = switchover::request(&api, name, &blocked.to, true)
        .await
        .map_err(kubernetes)?;
    let Requested::Annotated(annotation, value) = requested else {
        eprintln!(
            "refused: the blocked failover changed meanwhile; run `kubectl tusk approve {name}` again"
        );
        return Ok(ExitCode::from(1));
    };
    outln!(
        "approved: {annotation}={value} on {}/{name}",
        target.namespace
    )?;
    if wait == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let limit = Duration::from_secs(wait);
    let progress = switchover::wait(&api, name, &blocked.to, annotation, limit)
        .await
        .map_err(kubernetes)?;
    match progress {
        Progress::Primary => {
            outln!("{} is the primary of {name}", blocked.to)?;
            Ok(ExitCode::SUCCESS)
        }
        Progress::Refused => {
            eprintln!(
                "refused by the operator: see the ApprovalRejected event in `kubectl describe pgc {name}`"
            );
            Ok(ExitCode::from(1))
        }
        Progress::Pending => {
            eprintln!(
                "{} is not the primary of {name} after {wait} s; the approval stands",
                blocked.to
            );
            Ok(ExitCode::from(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(status: serde_json::Value, upgrade: Option<i32>) -> PostgresCluster {
        let mut spec =
            json!({"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"}});
        if let Some(version) = upgrade {
            spec["upgrade"] = json!({"approvedVersion": version});
        }
        serde_json::from_value(json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "db"}, "spec": spec, "status": status,
        }))
        .expect("a cluster")
    }

    fn blocked() -> serde_json::Value {
        json!({"failover": {"blocked": {
            "id": "54b26ac7a9", "from": "db-1", "to": "db-2", "lsnGapBytes": 256,
            "since": "2026-12-04T15:00:00Z"
        }}})
    }

    #[test]
    fn what_awaits_approval_is_listed_with_the_command_that_approves_it() {
        assert!(pending(&cluster(json!({}), None)).is_empty());
        assert!(
            pending(&cluster(json!({}), Some(15))).is_empty(),
            "no upgrade"
        );
        let lines = pending(&cluster(blocked(), Some(16)));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("promoting db-2 in place of db-1"),
            "{lines:?}"
        );
        assert!(lines[0].contains("256 bytes"), "{lines:?}");
        assert!(
            lines[0].ends_with("kubectl tusk approve db failover 54b26ac7a9"),
            "{lines:?}"
        );
        assert!(lines[1].contains("PostgreSQL 16: approved"), "{lines:?}");
    }

    #[test]
    fn an_upgrade_waiting_for_a_backup_is_listed_with_both_ways_on() {
        let mut waiting = cluster(
            json!({"upgrade": {"fromVersion": 15, "toVersion": 16, "step": "WaitingForBackup"}}),
            Some(16),
        );
        waiting.spec.postgres.version = 16;
        let lines = pending(&waiting);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("kubectl tusk backup db"), "{lines:?}");
        assert!(
            lines[0].ends_with("kubectl annotate pgc db tusk.dev/upgrade-without-backup=16"),
            "{lines:?}"
        );
        let mut started = cluster(
            json!({"upgrade": {"fromVersion": 15, "toVersion": 16, "step": "Upgrading"}}),
            Some(16),
        );
        started.spec.postgres.version = 16;
        assert!(pending(&started).is_empty());
    }

    #[test]
    fn only_the_blocked_decisions_identity_approves_it() {
        let with = cluster(blocked(), None);
        assert_eq!(
            judge_failover(&with, "54b26ac7a9").map(|b| b.to.as_str()),
            Ok("db-2")
        );
        let wrong = judge_failover(&with, "db-2").expect_err("an instance name approves nothing");
        assert!(wrong.contains("it is 54b26ac7a9"), "{wrong}");
        let none = judge_failover(&cluster(json!({}), None), "54b26ac7a9").expect_err("none");
        assert!(none.contains("nothing to approve"), "{none}");
    }

    #[test]
    fn an_upgrade_goes_to_a_later_major_version() {
        assert_eq!(judge_upgrade(15, 16), None);
        assert!(judge_upgrade(15, 15).is_some_and(|r| r.contains("not 15")));
        assert!(judge_upgrade(16, 15).is_some());
    }
}
