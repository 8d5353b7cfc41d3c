//! A pass computed and not carried out (`tusk plan`): the live objects
//! read from the API server, each instance's report read through the pod
//! proxy, then the reconcile's own [`validate`](super::validate) and
//! [`plan`](super::plan::plan), as a pass runs them. Nothing is written:
//! [`describe`] says what apply, status and events would do with the plan.
//!
//! Where this differs from the operator's own pass, the preview says so
//! in its notes: the operator times an unrenewed primary lease on its own
//! clock from the moment it first saw the lease's version, which a single
//! read cannot, so a failover waiting on the lease is shown waiting for the
//! lease's whole duration (the operator may be further along); and rollout
//! slots (how many clusters roll at once for an operator upgrade) are the
//! operator's to hand out, so one is taken to be free.

mod describe;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use tusk_api::contract::TlsSecret;
use tusk_api::v1alpha1::{PostgresBackup, PostgresCluster};

pub use describe::{EventLine, StatusChange, Step};

use super::fetch::{Observed, primary_failing};
use super::rollout::{Outdated, members};
use crate::builders::certificates::TokenKey;
use crate::children::Children;
use crate::config::OperatorConfig;
use crate::error::Error;
use crate::primacy::{self, LeaseObservations};
use crate::status::StatusInput;

/// What the next pass would do. The `-o json` document of `tusk plan`:
/// fields are only added, never renamed or removed.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub cluster: String,
    pub namespace: String,
    /// When it was computed.
    pub at: String,
    /// Why nothing would be applied: a spec the operator refuses with no
    /// valid one on record, or a paused cluster (whose steps then wait
    /// until it is resumed).
    pub held: Option<String>,
    /// A spec the operator refuses while it keeps the cluster as the last
    /// valid one declares it: why, and which generation the steps keep.
    pub refused: Option<String>,
    /// The writes, in the order the pass makes them, and what it waits for.
    pub steps: Vec<Step>,
    /// How the status would change.
    pub status: Vec<StatusChange>,
    /// The events the pass would publish.
    pub events: Vec<EventLine>,
    /// Instances whose manager gave no report, and why: the pass decides
    /// without their report, as the operator does when they are silent.
    pub unreached: Vec<String>,
    /// How this preview may differ from the operator's own pass.
    pub notes: Vec<String>,
}

/// Computes the next pass of `cluster` from the live objects, applying
/// nothing. `config` is the operator's (see
/// [`OperatorConfig::from_container`]).
pub async fn preview(
    client: &Client,
    config: &OperatorConfig,
    cluster: &PostgresCluster,
) -> Result<Preview, Error> {
    let (observed, unreached) = observe(client, cluster).await?;
    let now = Timestamp::now();
    let mut preview = Preview {
        cluster: cluster.name_any(),
        namespace: cluster.namespace().unwrap_or_default(),
        at: now.to_string(),
        held: None,
        refused: None,
        steps: Vec::new(),
        status: Vec::new(),
        events: Vec::new(),
        unreached: unreached
            .into_iter()
            .map(|(name, why)| format!("{name}: {why}"))
            .collect(),
        notes: Vec::new(),
    };
    let previous = cluster.status.as_ref();
    let target = match super::last_valid::choose(cluster, config, &observed) {
        Ok(target) => target,
        Err(error) => {
            let kept = StatusInput {
                failure: Some((error.category(), error.to_string())),
                ..StatusInput::unplanned(
                    cluster,
                    &observed.children.pods,
                    observed.children.volume_count(),
                    &observed.reports,
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
                )
            };
            preview.held = Some(format!("the spec is refused: {error}"));
            preview.status = describe::status_changes(previous, &crate::status::compose(&kept));
            return Ok(preview);
        }
    };
    preview.refused = target
        .refused
        .as_ref()
        .map(super::last_valid::Refusal::message);
    let (kept, valid) = (&target.cluster, &target.valid);
    let members = members(valid, config, &observed);
    let previous_rollout = previous.and_then(|s| s.rollout.as_ref());
    let slot = crate::rollout::needs_slot(&members, previous_rollout);
    if slot {
        preview.notes.push(format!(
            "the pods roll for the operator's version alone: the operator rolls at most {} \
             clusters at once and may hold this one back",
            config.max_concurrent_upgrades
        ));
    }
    let outdated = Outdated { members, slot };
    let mut plan = super::plan::plan(kept, valid, &observed, &outdated, now);
    target.describe(&mut plan.status, cluster);
    if valid.paused {
        preview.held = Some("spec.paused is true: these steps wait until it is unset".into());
    }
    if observed.lease.is_some() {
        preview.notes.push(
            "the primary is failing: the operator counts its lease's silence from when it first \
             saw it, this preview from now, so a failover waiting on the lease may come sooner"
                .into(),
        );
    }
    preview.steps = describe::steps(valid, &observed, &plan);
    preview.status = describe::status_changes(previous, &crate::status::compose(&plan.status));
    preview.events = describe::events(&plan.events);
    Ok(preview)
}

/// A token for the instances' `/status`, signed with the cluster's token
/// key, read with the user's own permissions (`get` on
/// `<cluster>-api-token-key`: the children's Secrets are listed by their
/// metadata only; the certificate authority's key is not needed); why
/// there is none otherwise.
async fn plan_token(client: &Client, namespace: &str, name: &str) -> Result<String, String> {
    let secret_name = TlsSecret::TokenKey.secret_name(name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|error| {
            format!(
                "the instance API answers holders of the cluster's token key only, and reading \
                 Secret {secret_name} failed: {error}"
            )
        })?
        .ok_or_else(|| format!("Secret {secret_name}, the cluster's token key, does not exist"))?;
    let key = TokenKey::from_secret(&secret).map_err(|e| e.to_string())?;
    let now = crate::instance_api::unix_now();
    key.sign_token(PLAN_SUBJECT, namespace, name, now)
        .map_err(|e| e.to_string())
}

/// Who a preview's tokens name.
const PLAN_SUBJECT: &str = "tusk-plan";

/// What a pass observes, read from the API server instead of the
/// operator's caches and lease watch; the instances that gave no report.
async fn observe(
    client: &Client,
    cluster: &PostgresCluster,
) -> Result<(Observed, Vec<(String, String)>), Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let children = Children::list(client, cluster).await?;
    let token = plan_token(client, &namespace, &name).await;
    let token = token.as_deref().map_err(String::as_str);
    let (reports, unreached) =
        crate::observe::poll_through_api(client, &children.pods, token).await;
    let lease = if primary_failing(cluster, &children, &reports) {
        let observations = LeaseObservations::default();
        let read = primacy::read(client, &observations, &namespace, &name).await;
        Some(read.map_err(Error::kube("read the primary lease"))?)
    } else {
        None
    };
    let backups: Api<PostgresBackup> = Api::namespaced(client.clone(), &namespace);
    let backups = backups
        .list(&ListParams::default())
        .await
        .map_err(Error::kube("list PostgresBackups"))?
        .items
        .into_iter()
        .filter(|b| b.spec.cluster == name)
        .collect();
    let rehearsal = super::rehearsal::fetch(cluster, client).await?;
    let upgrade = super::upgrade::fetch(cluster, client).await?;
    let observed = Observed {
        children,
        reports,
        lease,
        lease_quiet_since: None,
        lease_fenced_in: None,
        backups: Some(backups),
        rehearsal,
        upgrade,
        awaited: None,
    };
    Ok((observed, unreached))
}
