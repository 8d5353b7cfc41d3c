//! PodDisruptionBudgets: a voluntary disruption (node drain) may take one
//! replica at a time and never the primary without a switchover first.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tusk_api::labels;

use super::child_meta;
use crate::validate::ValidatedCluster;

/// The primary may not be evicted: a drain must wait for a switchover.
pub fn primary_pdb(cluster: &ValidatedCluster) -> PodDisruptionBudget {
    pdb(
        cluster,
        &cluster.name.primary_pdb(),
        labels::role::PRIMARY,
        IntOrString::Int(1),
        None,
    )
}

/// At most one replica down at a time; `None` for a single-instance
/// cluster, which has no replicas to protect.
pub fn replicas_pdb(cluster: &ValidatedCluster) -> Option<PodDisruptionBudget> {
    (cluster.instances > 1).then(|| {
        pdb(
            cluster,
            &cluster.name.replicas_pdb(),
            labels::role::REPLICA,
            IntOrString::Int(0),
            Some(IntOrString::Int(1)),
        )
    })
}

fn pdb(
    cluster: &ValidatedCluster,
    name: &str,
    role: &str,
    min_available: IntOrString,
    max_unavailable: Option<IntOrString>,
) -> PodDisruptionBudget {
    let selector = BTreeMap::from([
        (labels::CLUSTER.to_owned(), cluster.name.to_string()),
        (labels::ROLE.to_owned(), role.to_owned()),
    ]);
    PodDisruptionBudget {
        metadata: child_meta(cluster, name),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            }),
            // Exactly one of the two is set, as the API requires.
            min_available: max_unavailable.is_none().then_some(min_available),
            max_unavailable,
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    #[test]
    fn the_primary_is_protected_and_replicas_go_one_at_a_time() {
        let cluster = validated(
            serde_json::json!({"instances": 3, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        let primary = primary_pdb(&cluster).spec.expect("spec");
        assert_eq!(primary.min_available, Some(IntOrString::Int(1)));
        assert_eq!(primary.max_unavailable, None);
        let replicas = replicas_pdb(&cluster)
            .expect("three instances have replicas")
            .spec
            .expect("spec");
        assert_eq!(replicas.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(replicas.min_available, None);

        let single = validated(
            serde_json::json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        );
        assert!(replicas_pdb(&single).is_none());
    }
}
