//! The lifecycle state machine of R4, and the conditions that go with each
//! phase (R5). Pure: observations in, phase and conditions out.
//!
//! ```text
//! Pending -> Provisioning -> Ready
//! Provisioning -> Degraded (failure) -> Provisioning (retry, back-off)
//! Ready -> Scaling -> Ready
//! Ready -> Upgrading (a rolling update) -> Ready
//! Ready -> Degraded (an instance failed) -> Ready
//! any -> Deleting (deletionTimestamp set)
//! ```

use tusk_api::conditions::{self, ConditionStatus, DesiredCondition};
use tusk_api::v1alpha1::ClusterPhase;

use crate::error::ErrorCategory;

/// What the status step observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub deleting: bool,
    /// The reconcile's failure, if it failed, with a message for people.
    pub failure: Option<(ErrorCategory, String)>,
    pub declared: u32,
    /// Instances that exist (Pod or PVC).
    pub existing: u32,
    pub ready: u32,
    /// The cluster reached Ready at least once (initial provisioning done).
    pub provisioned: bool,
    /// A rolling update under way: what it does.
    pub rollout: Option<String>,
}

/// Phase plus the three standard conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    pub phase: ClusterPhase,
    pub ready: (ConditionStatus, &'static str, String),
    pub progressing: (ConditionStatus, &'static str, String),
    pub degraded: (ConditionStatus, &'static str, String),
}

impl Assessment {
    /// The conditions to set, in a stable order.
    pub fn conditions(&self) -> [DesiredCondition<'_>; 3] {
        [
            desired(conditions::READY, &self.ready),
            desired(conditions::PROGRESSING, &self.progressing),
            desired(conditions::DEGRADED, &self.degraded),
        ]
    }
}

fn desired<'a>(
    type_: &'a str,
    (status, reason, message): &'a (ConditionStatus, &'static str, String),
) -> DesiredCondition<'a> {
    DesiredCondition {
        type_,
        status: *status,
        reason,
        message,
    }
}

/// Decides the phase and conditions from what was observed.
pub fn assess(o: &Observation) -> Assessment {
    use ConditionStatus::{False, True};
    let counts = format!("{} of {} instances ready", o.ready, o.declared);
    let not_degraded = (False, "AsExpected", String::new());
    if o.deleting {
        return deleting(o);
    }
    if let Some((category, message)) = &o.failure {
        return failed(o, *category, message, counts);
    }
    let all_ready = o.ready == o.declared && o.existing == o.declared;
    if let Some(message) = o.rollout.as_ref().filter(|_| o.existing == o.declared) {
        let ready = if all_ready { True } else { False };
        return Assessment {
            phase: ClusterPhase::Upgrading,
            ready: (ready, "RollingUpdate", counts),
            progressing: (True, "RollingUpdate", message.clone()),
            degraded: not_degraded,
        };
    }
    if all_ready {
        return Assessment {
            phase: ClusterPhase::Ready,
            ready: (True, "AllInstancesReady", counts),
            progressing: (False, "Converged", "the cluster matches its spec".into()),
            degraded: not_degraded,
        };
    }
    if !o.provisioned {
        let phase = if o.existing == 0 {
            ClusterPhase::Pending
        } else {
            ClusterPhase::Provisioning
        };
        return Assessment {
            phase,
            ready: (False, "Provisioning", counts.clone()),
            progressing: (
                True,
                "Provisioning",
                format!("creating instances: {counts}"),
            ),
            degraded: not_degraded,
        };
    }
    if o.existing != o.declared {
        let direction = if o.existing < o.declared {
            "up"
        } else {
            "down"
        };
        return Assessment {
            phase: ClusterPhase::Scaling,
            ready: (False, "Scaling", counts.clone()),
            progressing: (
                True,
                "Scaling",
                format!(
                    "scaling {direction} from {} to {} instances",
                    o.existing, o.declared
                ),
            ),
            degraded: not_degraded,
        };
    }
    Assessment {
        phase: ClusterPhase::Degraded,
        ready: (False, "InstancesNotReady", counts.clone()),
        progressing: (
            True,
            "Recovering",
            "waiting for instances to become ready".into(),
        ),
        degraded: (True, "InstancesNotReady", counts),
    }
}

/// Deletion wins over everything.
fn deleting(o: &Observation) -> Assessment {
    use ConditionStatus::{False, True};
    Assessment {
        phase: ClusterPhase::Deleting,
        ready: (False, "Deleting", "the cluster is being deleted".into()),
        progressing: (
            True,
            "Deleting",
            "cleaning up before the cluster is removed".into(),
        ),
        degraded: match &o.failure {
            Some((category, message)) => (True, category.reason(), message.clone()),
            None => (False, "AsExpected", String::new()),
        },
    }
}

/// A failure degrades the cluster and says whether it is retried.
fn failed(
    o: &Observation,
    category: crate::error::ErrorCategory,
    message: &str,
    counts: String,
) -> Assessment {
    use ConditionStatus::{False, True};
    let retry = if category.is_transient() {
        "retrying with back-off"
    } else {
        "waiting for the spec to change"
    };
    let ready = if o.provisioned && o.ready == o.declared {
        True
    } else {
        False
    };
    Assessment {
        phase: ClusterPhase::Degraded,
        ready: (ready, category.reason(), counts),
        progressing: (False, category.reason(), retry.into()),
        degraded: (True, category.reason(), message.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observe(declared: u32, existing: u32, ready: u32, provisioned: bool) -> Observation {
        Observation {
            deleting: false,
            failure: None,
            declared,
            existing,
            ready,
            provisioned,
            rollout: None,
        }
    }

    #[test]
    fn a_new_cluster_goes_pending_provisioning_ready() {
        assert_eq!(
            assess(&observe(3, 0, 0, false)).phase,
            ClusterPhase::Pending
        );
        assert_eq!(
            assess(&observe(3, 1, 0, false)).phase,
            ClusterPhase::Provisioning
        );
        assert_eq!(
            assess(&observe(3, 2, 1, false)).phase,
            ClusterPhase::Provisioning
        );
        let ready = assess(&observe(3, 3, 3, false));
        assert_eq!(ready.phase, ClusterPhase::Ready);
        assert_eq!(ready.ready.0, ConditionStatus::True);
        assert_eq!(ready.progressing.0, ConditionStatus::False);
        assert_eq!(ready.degraded.0, ConditionStatus::False);
    }

    #[test]
    fn a_ready_cluster_scales_and_comes_back() {
        let scaling = assess(&observe(5, 3, 3, true));
        assert_eq!(scaling.phase, ClusterPhase::Scaling);
        assert!(scaling.progressing.2.contains("scaling up from 3 to 5"));
        assert_eq!(assess(&observe(2, 3, 3, true)).phase, ClusterPhase::Scaling);
        assert_eq!(assess(&observe(2, 2, 2, true)).phase, ClusterPhase::Ready);
    }

    #[test]
    fn a_failed_instance_degrades_a_ready_cluster() {
        let degraded = assess(&observe(3, 3, 2, true));
        assert_eq!(degraded.phase, ClusterPhase::Degraded);
        assert_eq!(
            degraded.degraded,
            (
                ConditionStatus::True,
                "InstancesNotReady",
                "2 of 3 instances ready".into()
            )
        );
    }

    #[test]
    fn failures_say_whether_they_are_retried() {
        let mut o = observe(3, 1, 0, false);
        o.failure = Some((
            ErrorCategory::ApiError,
            "the API server answered 500".into(),
        ));
        let transient = assess(&o);
        assert_eq!(transient.phase, ClusterPhase::Degraded);
        assert_eq!(transient.degraded.1, "ApiError");
        assert!(transient.progressing.2.contains("retrying"));

        o.failure = Some((
            ErrorCategory::InvalidSpec,
            "spec.storage.size: must be positive".into(),
        ));
        let permanent = assess(&o);
        assert_eq!(permanent.degraded.2, "spec.storage.size: must be positive");
        assert!(
            permanent
                .progressing
                .2
                .contains("waiting for the spec to change")
        );
    }

    #[test]
    fn deletion_wins_over_everything() {
        let mut o = observe(3, 3, 3, true);
        o.deleting = true;
        let deleting = assess(&o);
        assert_eq!(deleting.phase, ClusterPhase::Deleting);
        assert_eq!(deleting.ready.0, ConditionStatus::False);
    }

    #[test]
    fn conditions_come_in_a_stable_order() {
        let assessment = assess(&observe(1, 1, 1, true));
        let types: Vec<&str> = assessment.conditions().iter().map(|c| c.type_).collect();
        assert_eq!(types, ["Ready", "Progressing", "Degraded"]);
    }
}
