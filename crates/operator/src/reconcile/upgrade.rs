//! Fetch, decide and apply for major upgrades (decided in
//! [`crate::upgrade`]): the upgrade pod and the pre-check pod (with its
//! scratch volume) are read by name while an upgrade is declared or on
//! record (they are not cached: at most one of each per cluster, and only
//! then); apply creates or removes the pre-check, stops the instances,
//! creates or removes the upgrade pod, and removes the replicas'
//! old-major volumes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use tusk_api::instance::InstanceReport;
use tusk_api::labels;
use tusk_api::upgrade::{check_pod_name, pod_name};
use tusk_api::v1alpha1::{DeletionPolicy, PostgresCluster};

use super::rehearsal::{create_one_shot, observe, one_shot, remove_one_shot, settled};
use crate::builders::{upgrade_check_pod, upgrade_check_pvc, upgrade_pod};
use crate::children::{Children, named, pod_ready};
use crate::context::Context;
use crate::error::Error;
use crate::failover::FailoverCheck;
use crate::names::InstanceName;
use crate::rehearsal::Observed as PodObserved;
use crate::upgrade::{Action, CheckAction, UpgradeInput, UpgradePlan};
use crate::validate::ValidatedCluster;

/// The upgrade's pods as observed.
#[derive(Debug, Default)]
pub struct UpgradePods {
    /// The upgrade pod.
    pub pod: Option<PodObserved>,
    /// The pre-check pod, or its scratch volume without it.
    pub check: Option<PodObserved>,
}

/// The upgrade's pods, read only while the declared major differs from
/// the data's or an upgrade is on record and not completed.
pub async fn fetch(cluster: &PostgresCluster, client: &kube::Client) -> Result<UpgradePods, Error> {
    let status = cluster.status.as_ref();
    let declared_other = status
        .and_then(|s| s.postgres_version)
        .is_some_and(|v| v != cluster.spec.postgres.version);
    let on_record = status
        .and_then(|s| s.upgrade.as_ref())
        .is_some_and(|u| u.step != crate::upgrade::COMPLETED);
    if !declared_other && !on_record {
        return Ok(UpgradePods::default());
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let name = pod_name(&cluster.name_any());
    let pod = pods.get_opt(&name).await.map_err(|source| Error::Kube {
        action: format!("read the upgrade pod {name}"),
        source,
    })?;
    let check_name = check_pod_name(&cluster.name_any());
    let check = one_shot(client, &namespace, &check_name, "major upgrade's pre-check").await?;
    Ok(UpgradePods {
        pod: pod.as_ref().map(observe),
        check,
    })
}

/// What a pass observed that the upgrade decides on.
pub struct UpgradeObserved<'a> {
    pub children: &'a Children,
    pub reports: &'a BTreeMap<String, InstanceReport>,
    pub pods: &'a UpgradePods,
}

/// The pass's upgrade decisions.
pub fn decide(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    observed: &UpgradeObserved<'_>,
    check: &FailoverCheck,
    primary: &InstanceName,
    now: Timestamp,
) -> UpgradePlan {
    let status = cluster.status.as_ref();
    let children = observed.children;
    let pods: Vec<String> = children.pods.iter().map(ResourceExt::name_any).collect();
    let replica_volumes: Vec<String> = children
        .volumes
        .iter()
        .map(ResourceExt::name_any)
        .filter(|name| name != primary.as_str())
        .collect();
    let primary_major = named(&children.pods, primary.as_str())
        .filter(|pod| pod_ready(pod) && pod.meta().deletion_timestamp.is_none())
        .and_then(|_| observed.reports.get(primary.as_str()))
        .filter(|report| report.role == tusk_api::instance::InstanceRole::Primary && report.ready)
        .and_then(|report| report.postgres_version.as_deref())
        .and_then(|v| tusk_postgres::version::parse_version_output(v).ok())
        .map(|v| v.major);
    let serving = check.primary_available == Some(true)
        && check.record.is_none()
        && status.and_then(|s| s.current_primary.as_deref()) == Some(primary.as_str());
    crate::upgrade::decide(&UpgradeInput {
        running: valid.version,
        declared: valid
            .major_upgrade
            .as_ref()
            .map_or(valid.version, |t| t.version),
        recorded: status.and_then(|s| s.upgrade.as_ref()),
        generation: cluster.metadata.generation,
        paused: valid.paused,
        primary: primary.as_str(),
        primary_serving: serving,
        primary_major,
        pods: &pods,
        replica_volumes: &replica_volumes,
        pod: observed.pods.pod.as_ref(),
        check: observed.pods.check.as_ref(),
        restorable: valid.backups_unable().is_none(),
        last_backup: status
            .and_then(|s| s.backup.as_ref())
            .and_then(|b| b.last_successful_backup_time.as_ref())
            .map(|t| t.0),
        backup_max_age_hours: cluster
            .spec
            .upgrade
            .as_ref()
            .map_or(24, |u| u.backup_max_age_hours),
        backup_override: cluster
            .annotations()
            .get(labels::UPGRADE_WITHOUT_BACKUP)
            .map(String::as_str),
        now,
    })
}

/// Carries out the pass's upgrade action.
pub async fn apply(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    plan: &UpgradePlan,
    primary: &InstanceName,
) -> Result<(), Error> {
    if valid.paused {
        return Ok(());
    }
    apply_check(ctx, valid, plan.check).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    let name = pod_name(valid.name.as_str());
    match &plan.action {
        Action::None | Action::StartPrimary => Ok(()),
        Action::StopInstances => {
            for pod in &children.pods {
                if pod.meta().deletion_timestamp.is_none() {
                    let pod_name = pod.name_any();
                    let deleted = pods.delete(&pod_name, &DeleteParams::default()).await;
                    settled(deleted.map(drop), 404, || {
                        format!("stop instance {pod_name} for the major upgrade")
                    })?;
                }
            }
            Ok(())
        }
        Action::CreatePod => {
            let Some(target) = valid.major_upgrade.as_ref() else {
                return Ok(());
            };
            let pod = upgrade_pod(valid, &ctx.config, primary, target);
            let created = pods.create(&PostParams::default(), &pod).await;
            settled(created.map(drop), 409, || {
                format!("create the upgrade pod {name}")
            })
        }
        Action::RemovePod => {
            let deleted = pods.delete(&name, &DeleteParams::default()).await;
            settled(deleted.map(drop), 404, || {
                format!("delete the upgrade pod {name}")
            })
        }
        Action::RemoveReplicaVolumes => remove_replica_volumes(ctx, valid, children, primary).await,
    }
}

/// Creates the pre-check's scratch volume and pod, or deletes them.
async fn apply_check(
    ctx: &Context,
    valid: &ValidatedCluster,
    action: CheckAction,
) -> Result<(), Error> {
    const WHAT: &str = "upgrade pre-check";
    match action {
        CheckAction::None => Ok(()),
        CheckAction::Create => {
            let Some(target) = valid.major_upgrade.as_ref() else {
                return Ok(());
            };
            let pod = upgrade_check_pod(valid, &ctx.config, target);
            create_one_shot(ctx, &valid.namespace, &upgrade_check_pvc(valid), &pod, WHAT).await
        }
        CheckAction::Remove => {
            let name = check_pod_name(valid.name.as_str());
            remove_one_shot(ctx, &valid.namespace, &name, WHAT).await
        }
    }
}

/// The replicas' volumes of the old major: deleted, or released from the
/// cluster under `deletionPolicy: Retain` (as a removed replica's is).
async fn remove_replica_volumes(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    primary: &InstanceName,
) -> Result<(), Error> {
    let volumes: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for volume in &children.volumes {
        let name = volume.name_any();
        if name == primary.as_str() || volume.meta().deletion_timestamp.is_some() {
            continue;
        }
        if valid.deletion_policy == DeletionPolicy::Delete {
            let deleted = volumes.delete(&name, &DeleteParams::default()).await;
            settled(deleted.map(drop), 404, || {
                format!("delete the old major's volume {name}")
            })?;
        } else {
            crate::cleanup::retain_volume(&volumes, volume, &valid.owner.uid).await?;
        }
    }
    Ok(())
}
