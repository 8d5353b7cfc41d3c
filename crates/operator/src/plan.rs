//! The next safe step for a cluster's instances (R7, R8): pure, from what
//! was observed to what should change now. One step at a time: the first
//! instance must be ready before replicas are added, replicas are added one
//! by one, and scaling down removes a replica, never the primary.

use std::collections::BTreeMap;

use crate::names::{ClusterName, InstanceName};

/// One instance as observed through its Pod and PVC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedInstance {
    pub name: InstanceName,
    pub serial: u32,
    /// A Pod exists and is not being deleted.
    pub has_pod: bool,
    /// A PVC exists.
    pub has_volume: bool,
    /// The Pod is Ready.
    pub ready: bool,
}

/// What the plan may change about instances in this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceStep {
    /// Nothing to add or remove.
    Steady,
    /// Create this instance's PVC and Pod (a new serial).
    Create(InstanceName),
    /// Re-create the Pod of an instance whose PVC still exists.
    RecreatePod(InstanceName),
    /// Wait: an instance is not ready yet, and adding another would only
    /// compete with it (e.g. for the primary's bandwidth while cloning).
    WaitForReady(InstanceName),
    /// Remove this replica (Pod, and PVC per the deletion policy).
    Remove(InstanceName),
    /// Delete this instance's outdated Pod, keeping its PVC: the Pod is
    /// re-created from the current template (a rolling update's step,
    /// decided by [`crate::rollout`]).
    ReplacePod(InstanceName),
}

/// The plan for this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstancePlan {
    pub step: InstanceStep,
    /// The instance that should be primary.
    pub target_primary: InstanceName,
    /// Highest serial handed out once this plan is applied (recorded in
    /// status, so serials are never reused).
    pub latest_serial: u32,
}

/// Plans the next instance step.
///
/// `target_primary` is the primary recorded in status, if any; `latest_serial`
/// the highest serial ever handed out (status), which may exceed every
/// observed serial when instances were removed.
pub fn plan_instances(
    cluster: &ClusterName,
    declared: u32,
    observed: &[ObservedInstance],
    target_primary: Option<&str>,
    latest_serial: u32,
) -> InstancePlan {
    let by_name: BTreeMap<&str, &ObservedInstance> =
        observed.iter().map(|i| (i.name.as_str(), i)).collect();
    let latest_serial = observed
        .iter()
        .map(|i| i.serial)
        .max()
        .unwrap_or(0)
        .max(latest_serial);

    let target = choose_target(cluster, &by_name, observed, target_primary, latest_serial);

    let plan = |step, latest_serial| InstancePlan {
        step,
        target_primary: target.clone(),
        latest_serial,
    };

    // Instances whose pod is gone but whose data remains come back first.
    if let Some(orphan) = observed
        .iter()
        .filter(|i| i.has_volume && !i.has_pod)
        .min_by_key(|i| i.serial)
    {
        return plan(
            InstanceStep::RecreatePod(orphan.name.clone()),
            latest_serial,
        );
    }

    let count = u32::try_from(observed.len()).unwrap_or(u32::MAX);
    if count == 0 {
        return plan(
            InstanceStep::Create(target.clone()),
            latest_serial.max(serial_of(cluster, &target)),
        );
    }
    if let Some(unready) = observed
        .iter()
        .filter(|i| !i.ready)
        .min_by_key(|i| i.serial)
    {
        // Removing an unready replica is always safe and may be what
        // unblocks a scale-down.
        if count > declared && unready.name != target {
            return plan(InstanceStep::Remove(unready.name.clone()), latest_serial);
        }
        return plan(
            InstanceStep::WaitForReady(unready.name.clone()),
            latest_serial,
        );
    }
    if count < declared {
        let next = cluster.instance(latest_serial + 1);
        return plan(InstanceStep::Create(next), latest_serial + 1);
    }
    if count > declared {
        // The newest replica goes first: it has the least history.
        if let Some(victim) = observed
            .iter()
            .filter(|i| i.name != target)
            .max_by_key(|i| i.serial)
        {
            return plan(InstanceStep::Remove(victim.name.clone()), latest_serial);
        }
    }
    plan(InstanceStep::Steady, latest_serial)
}

/// The primary: the recorded target if it still exists, otherwise (a new
/// cluster) the first instance. Choosing a new primary for a cluster whose
/// primary vanished is failover's job, not this plan's.
fn choose_target(
    cluster: &ClusterName,
    by_name: &BTreeMap<&str, &ObservedInstance>,
    observed: &[ObservedInstance],
    target_primary: Option<&str>,
    latest_serial: u32,
) -> InstanceName {
    match target_primary.and_then(|t| by_name.get(t)) {
        Some(instance) => instance.name.clone(),
        None => match target_primary {
            Some(recorded) => InstanceName::recorded(recorded),
            None => observed
                .iter()
                .min_by_key(|i| i.serial)
                .map(|i| i.name.clone())
                .unwrap_or_else(|| cluster.instance(latest_serial + 1)),
        },
    }
}

fn serial_of(cluster: &ClusterName, instance: &InstanceName) -> u32 {
    cluster.serial_of(instance.as_str()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::new("orders").expect("valid")
    }

    fn instance(serial: u32, ready: bool) -> ObservedInstance {
        ObservedInstance {
            name: cluster().instance(serial),
            serial,
            has_pod: true,
            has_volume: true,
            ready,
        }
    }

    #[test]
    fn a_new_cluster_starts_with_its_first_instance_as_primary() {
        let plan = plan_instances(&cluster(), 3, &[], None, 0);
        assert_eq!(plan.step, InstanceStep::Create(cluster().instance(1)));
        assert_eq!(plan.target_primary.as_str(), "orders-1");
        assert_eq!(plan.latest_serial, 1);
    }

    #[test]
    fn replicas_wait_until_the_first_instance_is_ready() {
        let plan = plan_instances(&cluster(), 3, &[instance(1, false)], Some("orders-1"), 1);
        assert_eq!(plan.step, InstanceStep::WaitForReady(cluster().instance(1)));
    }

    #[test]
    fn replicas_are_added_one_at_a_time_with_fresh_serials() {
        let plan = plan_instances(&cluster(), 3, &[instance(1, true)], Some("orders-1"), 1);
        assert_eq!(plan.step, InstanceStep::Create(cluster().instance(2)));
        assert_eq!(plan.latest_serial, 2);
        let plan = plan_instances(
            &cluster(),
            3,
            &[instance(1, true), instance(2, false)],
            Some("orders-1"),
            2,
        );
        assert_eq!(plan.step, InstanceStep::WaitForReady(cluster().instance(2)));
    }

    #[test]
    fn serials_are_never_reused() {
        // orders-2 and orders-3 were removed earlier; status remembers 3.
        let plan = plan_instances(&cluster(), 2, &[instance(1, true)], Some("orders-1"), 3);
        assert_eq!(plan.step, InstanceStep::Create(cluster().instance(4)));
        assert_eq!(plan.latest_serial, 4);
    }

    #[test]
    fn scaling_down_removes_the_newest_replica_never_the_primary() {
        let observed = [instance(1, true), instance(2, true), instance(3, true)];
        let plan = plan_instances(&cluster(), 2, &observed, Some("orders-3"), 3);
        assert_eq!(plan.step, InstanceStep::Remove(cluster().instance(2)));
        let plan = plan_instances(&cluster(), 1, &observed[..1], Some("orders-1"), 3);
        assert_eq!(plan.step, InstanceStep::Steady);
    }

    #[test]
    fn an_unready_replica_is_removed_first_when_scaling_down() {
        let observed = [instance(1, true), instance(2, true), instance(3, false)];
        let plan = plan_instances(&cluster(), 2, &observed, Some("orders-1"), 3);
        assert_eq!(plan.step, InstanceStep::Remove(cluster().instance(3)));
    }

    #[test]
    fn a_lost_pod_is_recreated_on_its_volume() {
        let mut lost = instance(2, false);
        lost.has_pod = false;
        let plan = plan_instances(
            &cluster(),
            3,
            &[instance(1, true), lost],
            Some("orders-1"),
            2,
        );
        assert_eq!(plan.step, InstanceStep::RecreatePod(cluster().instance(2)));
    }

    #[test]
    fn the_recorded_primary_is_kept_even_when_it_is_not_the_oldest() {
        let observed = [instance(1, true), instance(2, true)];
        let plan = plan_instances(&cluster(), 2, &observed, Some("orders-2"), 2);
        assert_eq!(plan.target_primary.as_str(), "orders-2");
        assert_eq!(plan.step, InstanceStep::Steady);
    }
}
