//! The rolling update's view of one pass: each instance's pod against the
//! template the cluster declares now ([`members`]), and the decision
//! ([`decide`]), carried out by the plan (a pod to replace, a switchover).
//! The decision itself is [`crate::rollout`]'s, pure and table-tested.

use kube::ResourceExt;
use tusk_api::instance::InstanceRole;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_postgres::lsn::Lsn;

use super::fetch::Observed;
use crate::builders::{Fingerprint, pod_fingerprint};
use crate::children::{named, pod_ready};
use crate::config::OperatorConfig;
use crate::context::Context;
use crate::freshness::cluster_key;
use crate::rollout::{self, Input, Member, Rollout};
use crate::validate::ValidatedCluster;

/// What the rollout needs beyond the plan's other inputs.
pub struct Outdated {
    pub members: Vec<Member>,
    /// A rollout slot is held for this cluster.
    pub slot: bool,
}

impl Outdated {
    /// Compares every instance's pod with its declared template, and
    /// takes or gives back this cluster's slot (see [`rollout::slots`]):
    /// it is given back once the last pod replaced serves again.
    pub fn observe(
        cluster: &PostgresCluster,
        valid: &ValidatedCluster,
        ctx: &Context,
        observed: &Observed,
    ) -> Self {
        let members = members(valid, &ctx.config, observed);
        let key = cluster_key(cluster);
        let previous = cluster.status.as_ref().and_then(|s| s.rollout.as_ref());
        let slot = if rollout::needs_slot(&members, previous) {
            ctx.rollout_slots.acquire(&key)
        } else {
            ctx.rollout_slots.release(&key);
            false
        };
        Self { members, slot }
    }
}

/// Each instance that has a pod or a volume, in serial order.
pub fn members(
    valid: &ValidatedCluster,
    config: &OperatorConfig,
    observed: &Observed,
) -> Vec<Member> {
    let children = &observed.children;
    let mut names: Vec<(u32, String)> = children
        .pods
        .iter()
        .map(ResourceExt::name_any)
        .chain(children.volumes.iter().map(ResourceExt::name_any))
        .filter_map(|name| valid.name.serial_of(&name).map(|serial| (serial, name)))
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|(serial, name)| {
            let pod =
                named(&children.pods, &name).filter(|p| p.metadata.deletion_timestamp.is_none());
            let desired = pod_fingerprint(valid, config, &valid.name.instance(serial));
            // An instance without a pod gets one from the current template.
            let mut reasons = pod.map_or_else(Vec::new, |pod| {
                desired.reasons(Fingerprint::of_live(pod).as_ref())
            });
            let report = observed.reports.get(&name);
            // Settings waiting for a restart: the managers of a cluster
            // leave them to the rollout (`rollout::PENDING_RESTART`).
            let pending = pod.is_some() && report.is_some_and(|r| !r.pending_restart.is_empty());
            if pending && reasons.is_empty() {
                reasons.push(crate::rollout::PENDING_RESTART);
            }
            let lowers_minimums =
                pending && report.is_some_and(|r| !r.pending_restart_lowered.is_empty());
            let streaming = report.is_some_and(|r| match r.role {
                InstanceRole::Primary => r.ready && !r.fenced,
                _ => r.ready && r.streaming == Some(true) && primary_streams_to(observed, &name),
            });
            let position = report
                .and_then(|r| r.received_lsn.as_deref().or(r.current_lsn.as_deref()))
                .and_then(|lsn| lsn.parse::<Lsn>().ok())
                .map(|lsn| lsn.0);
            Member {
                name,
                reasons,
                lowers_minimums,
                ready: pod.is_some_and(pod_ready),
                streaming,
                position,
            }
        })
        .collect()
}

/// Whether the serving primary's report lists `standby` as streaming: a
/// standby still catching up confirms no commit, so replacing the next
/// one before it streams would hold synchronous commits up.
fn primary_streams_to(observed: &Observed, standby: &str) -> bool {
    observed
        .reports
        .values()
        .filter(|r| r.role == InstanceRole::Primary && r.ready)
        .flat_map(|r| &r.standbys)
        .any(|s| s.name == standby && s.state == "streaming")
}

/// The rollout's decision in this pass; `settled` when nothing else moves.
pub fn decide(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    outdated: &Outdated,
    primary: &str,
    settled: bool,
) -> Rollout {
    let paused_by_annotation = cluster
        .annotations()
        .get(labels::PAUSE_ROLLOUT)
        .map(String::as_str)
        == Some("true");
    rollout::decide(&Input {
        members: outdated.members.clone(),
        primary: primary.to_owned(),
        settled,
        method: cluster
            .spec
            .upgrade
            .as_ref()
            .map(|u| u.primary_update_method)
            .unwrap_or_default(),
        paused: valid.paused || paused_by_annotation,
        slot: outdated.slot,
        previous: cluster.status.as_ref().and_then(|s| s.rollout.clone()),
    })
}
