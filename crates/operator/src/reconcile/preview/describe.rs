//! A [`Plan`] in words: the writes apply would make in its order
//! (credentials, certificates and identity, Services and budgets, volumes, the instance
//! step, role labels, then backups and rehearsals), what the primary's
//! check decided, how the status would change and which events would be
//! published. Pure: built from the plan and what was observed.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use tusk_api::contract::TlsSecret;
use tusk_api::v1alpha1::{DeletionPolicy, PostgresClusterStatus};

use super::super::Plan;
use super::super::certificates::Need;
use super::super::fetch::Observed;
use super::super::secrets::made_for;
use crate::apply::{Applied, change};
use crate::builders::{self, Credential};
use crate::children::{Children, named};
use crate::failover::FailoverCheck;
use crate::note::Note;
use crate::plan::InstanceStep;
use crate::validate::ValidatedCluster;

/// One thing the pass would do.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// `create`, `update`, `delete`, `label`, `promote`, `record`,
    /// `refuse` or `wait`.
    pub action: &'static str,
    /// `Kind/name`; empty for a wait on nothing in particular.
    pub object: String,
    pub why: String,
}

/// A status field that would change.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatusChange {
    /// `phase`, `currentPrimary`, ... or `condition <Type>`.
    pub field: String,
    pub from: String,
    pub to: String,
}

/// An event the pass would publish.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

fn step(action: &'static str, object: String, why: impl Into<String>) -> Step {
    Step {
        action,
        object,
        why: why.into(),
    }
}

fn object<K: Resource<DynamicType = ()>>(name: &str) -> String {
    format!("{}/{name}", K::kind(&()))
}

pub fn steps(valid: &ValidatedCluster, observed: &Observed, plan: &Plan<'_>) -> Vec<Step> {
    let mut steps = children(valid, &observed.children, &plan.certificates);
    steps.extend(volumes(valid, &observed.children, plan));
    steps.extend(instance_step(valid, &observed.children, plan));
    steps.extend(plan.roles.iter().map(|change| {
        let object = object::<Pod>(&change.pod);
        match change.role {
            Some(role) => step(
                "label",
                object,
                format!("role={role}, as its instance reports"),
            ),
            None => step(
                "label",
                object,
                "remove the role label: its role is unknown",
            ),
        }
    }));
    steps.extend(primary(&plan.primary));
    steps.extend(data_protection(valid, plan));
    steps.extend(major_upgrade(valid, observed, plan));
    let cluster = format!("PostgresCluster/{}", valid.name.as_str());
    steps.extend(plan.clear.iter().map(|key| {
        step(
            "update",
            cluster.clone(),
            format!("remove the annotation {key}: acted on"),
        )
    }));
    steps
}

/// The certificate Secrets, as the plan says.
fn certificates(valid: &ValidatedCluster, needs: &[(TlsSecret, Need)]) -> Vec<Step> {
    needs
        .iter()
        .filter_map(|&(which, need)| {
            let object = object::<Secret>(&which.secret_name(valid));
            match need {
                Need::Current => None,
                Need::Create => Some(step("create", object, "a new certificate")),
                Need::Renew => Some(step(
                    "update",
                    object,
                    "issued again: due for renewal, or from another authority",
                )),
                Need::Readdress => Some(step(
                    "update",
                    object,
                    "issued again to name the instance pods' addresses",
                )),
                Need::Foreign => Some(step(
                    "refuse",
                    object,
                    "it was not created by Tusk for this cluster: the pass fails here",
                )),
            }
        })
        .collect()
}

/// Credentials, certificates, identity, Services and disruption budgets: each one
/// missing is created, each one that differs from its builder's is
/// updated, as apply does.
fn children(
    valid: &ValidatedCluster,
    children: &Children,
    certificate_needs: &[(TlsSecret, Need)],
) -> Vec<Step> {
    let mut steps = Vec::new();
    for credential in Credential::ALL {
        let name = credential.secret_name(valid);
        let object = object::<Secret>(&name);
        match named(&children.secrets, &name) {
            Some(live) if made_for(live, valid) => {}
            Some(_) => steps.push(step(
                "refuse",
                object,
                "it was not created by Tusk for this cluster: the pass fails here",
            )),
            None => steps.push(step("create", object, "a generated password")),
        }
    }
    for role in builders::generated_roles(valid) {
        let name = tusk_api::v1alpha1::generated_secret_name(valid.name.as_str(), &role.name);
        if named(&children.secrets, &name).is_none() {
            let why = format!("a generated password for declared role {}", role.name);
            steps.push(step("create", object::<Secret>(&name), why));
        }
    }
    steps.extend(certificates(valid, certificate_needs));
    let account = valid.name.instance_account();
    steps.extend(compared(
        named(&children.service_accounts, &account),
        &builders::instance_service_account(valid),
    ));
    steps.extend(compared(
        named(&children.roles, &account),
        &builders::instance_role(valid),
    ));
    steps.extend(compared(
        named(&children.role_bindings, &account),
        &builders::instance_role_binding(valid),
    ));
    for service in [
        builders::rw_service(valid),
        builders::ro_service(valid),
        builders::r_service(valid),
    ] {
        steps.extend(compared(
            named(&children.services, &service.name_any()),
            &service,
        ));
    }
    let primary = builders::primary_pdb(valid);
    steps.extend(compared(
        named(&children.pdbs, &primary.name_any()),
        &primary,
    ));
    match builders::replicas_pdb(valid) {
        Some(pdb) => steps.extend(compared(named(&children.pdbs, &pdb.name_any()), &pdb)),
        None if named(&children.pdbs, &valid.name.replicas_pdb()).is_some() => {
            steps.push(step(
                "delete",
                object::<PodDisruptionBudget>(&valid.name.replicas_pdb()),
                "no replicas to budget for",
            ));
        }
        None => {}
    }
    match builders::network_policy(valid) {
        Some(policy) => steps.extend(compared(
            named(&children.network_policies, &policy.name_any()),
            &policy,
        )),
        None if named(&children.network_policies, valid.name.as_str()).is_some() => {
            steps.push(step(
                "delete",
                object::<NetworkPolicy>(valid.name.as_str()),
                "spec.networkPolicy is not set",
            ));
        }
        None => {}
    }
    steps
}

/// The step applying `desired` over `live` makes, if any.
fn compared<K>(live: Option<&K>, desired: &K) -> Option<Step>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let object = object::<K>(&desired.name_any());
    match change(live, desired) {
        Applied::Created => Some(step("create", object, "missing")),
        Applied::Updated => Some(step(
            "update",
            object,
            "differs from what Tusk sets (restored)",
        )),
        Applied::Unchanged | Applied::Existing => None,
    }
}

/// Volume growth and owner references.
fn volumes(valid: &ValidatedCluster, children: &Children, plan: &Plan<'_>) -> Vec<Step> {
    let declared = &valid.storage_size.0;
    let grow = plan.resizes.iter().map(|instance| {
        let live = named(&children.volumes, instance.as_str())
            .and_then(|v| v.spec.as_ref()?.resources.as_ref()?.requests.as_ref())
            .and_then(|requests| requests.get("storage"))
            .map_or_else(|| "no size".to_owned(), |q| q.0.clone());
        step(
            "update",
            object::<PersistentVolumeClaim>(instance.as_str()),
            format!("grow from {live} to {declared} (spec.storage.size)"),
        )
    });
    let owned = if builders::owned_by_cluster(valid) {
        "owned by the cluster: deleted with it (deletionPolicy: Delete)"
    } else {
        "not owned by the cluster: kept when it is deleted (deletionPolicy: Retain)"
    };
    let owners = plan.owners.iter().map(|change| {
        step(
            "update",
            object::<PersistentVolumeClaim>(&change.volume),
            owned,
        )
    });
    grow.chain(owners).collect()
}

fn instance_step(valid: &ValidatedCluster, children: &Children, plan: &Plan<'_>) -> Vec<Step> {
    let observed = children.pods.len();
    let pod = |name: &str| object::<Pod>(name);
    let volume = |name: &str| object::<PersistentVolumeClaim>(name);
    match &plan.instances.step {
        InstanceStep::Steady => Vec::new(),
        InstanceStep::Create(instance) => {
            let name = instance.as_str();
            let mut steps = Vec::new();
            if named(&children.volumes, name).is_none() {
                steps.push(step(
                    "create",
                    volume(name),
                    format!("the volume of a new instance ({})", valid.storage_size.0),
                ));
            }
            steps.push(step(
                "create",
                pod(name),
                format!(
                    "a new instance: {} declared, {observed} with a pod",
                    valid.instances
                ),
            ));
            steps
        }
        InstanceStep::RecreatePod(instance) => vec![step(
            "create",
            pod(instance.as_str()),
            "its volume is there, its pod is not: re-created on the volume",
        )],
        InstanceStep::WaitForReady(instance) => vec![step(
            "wait",
            pod(instance.as_str()),
            "not ready (or still terminating): instances change one at a time",
        )],
        InstanceStep::ReplacePod(instance) => {
            let reason = plan
                .rollout
                .status
                .as_ref()
                .map_or("rolling update", |s| s.reason.as_str());
            vec![step(
                "delete",
                pod(instance.as_str()),
                format!("outdated ({reason}): re-created from the current template on its volume"),
            )]
        }
        InstanceStep::Remove(instance) => {
            let name = instance.as_str();
            let kept = if valid.deletion_policy == DeletionPolicy::Delete {
                step("delete", volume(name), "deletionPolicy: Delete")
            } else {
                step(
                    "update",
                    volume(name),
                    "kept and labelled retained (deletionPolicy: Retain)",
                )
            };
            vec![
                step(
                    "delete",
                    pod(name),
                    format!("scaling down to {} instances", valid.instances),
                ),
                kept,
            ]
        }
    }
}

/// The primary check's outcome: a promotion, or why none happens yet.
fn primary(check: &FailoverCheck) -> Option<Step> {
    if let Some(record) = &check.record {
        let lease = check
            .lease_takeover
            .as_ref()
            .map(|version| format!("; it takes the primary lease over at version {version}"))
            .unwrap_or_default();
        return Some(step(
            "promote",
            object::<Pod>(&record.to),
            format!(
                "{} from {}: {} bytes of WAL behind what was last seen of {}{lease}",
                record.reason, record.from, record.lsn_gap_bytes, record.from
            ),
        ));
    }
    if let Some(blocked) = &check.blocked {
        return Some(step(
            "wait",
            object::<Pod>(&blocked.to),
            format!(
                "the failover from {} is blocked: up to {} bytes of acknowledged WAL may be lost; \
                 `kubectl tusk approve` approves exactly this decision ({})",
                blocked.from, blocked.lsn_gap_bytes, blocked.id
            ),
        ));
    }
    if let Some(stalled) = &check.stalled {
        return Some(step(
            "wait",
            String::new(),
            format!("the promotion stalled: {stalled}"),
        ));
    }
    let left = check
        .delay_left
        .filter(|_| check.primary_available == Some(false))?;
    Some(step(
        "wait",
        String::new(),
        format!(
            "the primary is unavailable: a failover is decided in {:.1} s unless it recovers",
            left.as_secs_f64()
        ),
    ))
}

/// Scheduled backups, backup records and restore rehearsals.
fn data_protection(valid: &ValidatedCluster, plan: &Plan<'_>) -> Vec<Step> {
    let mut steps = Vec::new();
    if let Some(due) = &plan.backups.scheduled {
        steps.push(step(
            "create",
            format!("PostgresBackup/{}", due.name),
            format!("the schedule's backup for {}", due.slot),
        ));
    }
    for (name, status) in plan.backups.decided.iter().flat_map(|d| &d.records) {
        let phase = status
            .phase
            .map_or("no phase".to_owned(), |p| format!("{p:?}"));
        steps.push(step(
            "record",
            format!("PostgresBackup/{name}"),
            format!("its status: {phase}"),
        ));
    }
    let rehearsal = &plan.rehearsal;
    let name = tusk_api::rehearsal::pod_name(valid.name.as_str());
    if rehearsal.start {
        steps.push(step(
            "create",
            object::<PersistentVolumeClaim>(&name),
            "a restore rehearsal's scratch volume",
        ));
        steps.push(step(
            "create",
            object::<Pod>(&name),
            "a restore rehearsal of the newest backup",
        ));
    }
    if rehearsal.record.is_some() {
        steps.push(step(
            "record",
            String::new(),
            "the restore rehearsal's outcome in status",
        ));
    }
    if rehearsal.remove {
        steps.push(step(
            "delete",
            object::<Pod>(&name),
            "the finished restore rehearsal",
        ));
        steps.push(step(
            "delete",
            object::<PersistentVolumeClaim>(&name),
            "its scratch volume",
        ));
    }
    steps
}

/// The major upgrade's action (the primary's pod it starts is the
/// instance step's).
fn major_upgrade(valid: &ValidatedCluster, observed: &Observed, plan: &Plan<'_>) -> Vec<Step> {
    use crate::upgrade::Action;
    let upgrade = &plan.upgrade;
    let name = tusk_api::upgrade::pod_name(valid.name.as_str());
    let step_now = upgrade.record.as_ref().map_or("", |r| r.step.as_str());
    let why = |what: &str| format!("major upgrade ({step_now}): {what}");
    let primary = plan.instances.target_primary.as_str();
    let live = |items: &[(String, bool)]| -> Vec<String> {
        items
            .iter()
            .filter(|(_, deleting)| !deleting)
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut steps = pre_check(valid, upgrade.check, &why);
    steps.extend(match upgrade.action {
        Action::None | Action::StartPrimary => Vec::new(),
        Action::StopInstances => {
            let pods: Vec<(String, bool)> = observed
                .children
                .pods
                .iter()
                .map(|p| (p.name_any(), p.metadata.deletion_timestamp.is_some()))
                .collect();
            live(&pods)
                .into_iter()
                .map(|pod| step("delete", object::<Pod>(&pod), why("every instance stops")))
                .collect()
        }
        Action::CreatePod => vec![step(
            "create",
            object::<Pod>(&name),
            why(&format!("pg_upgrade on the volume of {primary}")),
        )],
        Action::RemovePod => vec![step(
            "delete",
            object::<Pod>(&name),
            why("its outcome is recorded"),
        )],
        Action::RemoveReplicaVolumes => {
            let volumes: Vec<(String, bool)> = observed
                .children
                .volumes
                .iter()
                .filter(|v| v.name_any() != primary)
                .map(|v| (v.name_any(), v.metadata.deletion_timestamp.is_some()))
                .collect();
            let action = if valid.deletion_policy == tusk_api::v1alpha1::DeletionPolicy::Delete {
                "delete"
            } else {
                "release"
            };
            live(&volumes)
                .into_iter()
                .map(|volume| {
                    step(
                        action,
                        object::<PersistentVolumeClaim>(&volume),
                        why("it holds the old major's data; the replica is cloned again"),
                    )
                })
                .collect()
        }
    });
    steps
}

/// The pre-check's pod and scratch volume, created or removed.
fn pre_check(
    valid: &ValidatedCluster,
    action: crate::upgrade::CheckAction,
    why: &dyn Fn(&str) -> String,
) -> Vec<Step> {
    use crate::upgrade::CheckAction;
    let name = tusk_api::upgrade::check_pod_name(valid.name.as_str());
    let (verb, what) = match action {
        CheckAction::None => return Vec::new(),
        CheckAction::Create => (
            "create",
            "pg_upgrade --check on a restore of the newest backup",
        ),
        CheckAction::Remove => ("delete", "the pre-check is over"),
    };
    vec![
        step(verb, object::<PersistentVolumeClaim>(&name), why(what)),
        step(verb, object::<Pod>(&name), why(what)),
    ]
}

/// The status fields a user reads that would change.
pub fn status_changes(
    previous: Option<&PostgresClusterStatus>,
    next: &PostgresClusterStatus,
) -> Vec<StatusChange> {
    let empty = PostgresClusterStatus::default();
    let old = previous.unwrap_or(&empty);
    let text = |value: Option<&str>| value.unwrap_or("none").to_owned();
    let mut changes = Vec::new();
    let mut field = |field: &str, from: String, to: String| {
        if from != to {
            changes.push(StatusChange {
                field: field.to_owned(),
                from,
                to,
            });
        }
    };
    let phase = |s: &PostgresClusterStatus| text(s.phase.map(|p| p.as_str()));
    field("phase", phase(old), phase(next));
    field(
        "currentPrimary",
        text(old.current_primary.as_deref()),
        text(next.current_primary.as_deref()),
    );
    field(
        "targetPrimary",
        text(old.target_primary.as_deref()),
        text(next.target_primary.as_deref()),
    );
    field(
        "readyInstances",
        old.ready_instances.to_string(),
        next.ready_instances.to_string(),
    );
    let kept = |s: &PostgresClusterStatus| {
        let generation = s.last_valid_spec.as_ref().map(|r| r.generation);
        generation.map_or_else(|| "none".to_owned(), |g| format!("generation {g}"))
    };
    field("lastValidSpec", kept(old), kept(next));
    let types = next
        .conditions
        .iter()
        .chain(&old.conditions)
        .map(|c| c.type_.as_str());
    let mut seen: Vec<&str> = Vec::new();
    for type_ in types {
        if seen.contains(&type_) {
            continue;
        }
        seen.push(type_);
        let state =
            |s: &PostgresClusterStatus| condition(s.conditions.iter().find(|c| c.type_ == type_));
        field(&format!("condition {type_}"), state(old), state(next));
    }
    changes
}

fn condition(condition: Option<&Condition>) -> String {
    condition.map_or_else(
        || "absent".to_owned(),
        |c| format!("{} ({}): {}", c.status, c.reason, c.message),
    )
}

pub fn events(notes: &[Note]) -> Vec<EventLine> {
    notes
        .iter()
        .map(|note| EventLine {
            type_: if note.warning { "Warning" } else { "Normal" },
            reason: note.reason.clone(),
            message: note.text.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
