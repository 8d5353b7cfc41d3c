//! The scaling decisions of a rollout, as pure functions of replica
//! counts (kube-controller-manager's `pkg/controller/deployment/rolling.go`
//! and `util/deployment_util.go`): how far the new ReplicaSet may grow and
//! how far the old ones may shrink within `maxSurge` and
//! `maxUnavailable`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// `maxSurge` and `maxUnavailable` resolved against the replica count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_surge: i32,
    pub max_unavailable: i32,
}

/// A ReplicaSet as the rollout counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
}

fn scaled(value: &IntOrString, total: i32, round_up: bool, field: &str) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) if *n >= 0 => Ok(*n),
        IntOrString::Int(n) => Err(format!("{field}: {n} must be greater than or equal to 0")),
        IntOrString::String(text) => {
            let percent = text
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .filter(|p| *p >= 0)
                .ok_or_else(|| format!("{field}: {text:?} must be an integer or a percentage"))?;
            let product = i64::from(total) * percent;
            let value = if round_up {
                (product + 99) / 100
            } else {
                product / 100
            };
            i32::try_from(value).map_err(|_| format!("{field}: {text:?} is too large"))
        }
    }
}

/// Resolves the rolling-update parameters (`ResolveFenceposts`): a surge
/// percentage rounds up, an unavailability one down, and both at zero
/// would block the rollout, so unavailability becomes one.
pub fn limits(
    replicas: i32,
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
) -> Result<Limits, String> {
    let quarter = IntOrString::String("25%".into());
    let surge = scaled(max_surge.unwrap_or(&quarter), replicas, true, "maxSurge")?;
    let mut unavailable = scaled(
        max_unavailable.unwrap_or(&quarter),
        replicas,
        false,
        "maxUnavailable",
    )?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok(Limits {
        max_surge: surge,
        max_unavailable: unavailable.min(replicas),
    })
}

/// The size of the new ReplicaSet for this step (`NewRSNewReplicas`):
/// toward `replicas`, with at most `replicas + maxSurge` pods asked for
/// across all ReplicaSets.
pub fn new_replicas(replicas: i32, limits: Limits, new: &Set, olds: &[Set]) -> i32 {
    if new.replicas >= replicas {
        return replicas;
    }
    let current: i32 = new.replicas + olds.iter().map(|s| s.replicas).sum::<i32>();
    let max_total = replicas + limits.max_surge;
    if current >= max_total {
        return new.replicas;
    }
    new.replicas + (max_total - current).min(replicas - new.replicas)
}

/// The old ReplicaSets' sizes after this step (in the order given, oldest
/// first): unavailable pods go first (`cleanupUnhealthyReplicas`), then
/// available ones while more than `replicas - maxUnavailable` stay
/// available.
pub fn old_replicas(replicas: i32, limits: Limits, new: &Set, olds: &[Set]) -> Vec<i32> {
    let mut sizes: Vec<i32> = olds.iter().map(|s| s.replicas).collect();
    let old_total: i32 = sizes.iter().sum();
    if old_total == 0 {
        return sizes;
    }
    let min_available = replicas - limits.max_unavailable;
    let new_unavailable = (new.replicas - new.available).max(0);
    let mut budget = old_total + new.replicas - min_available - new_unavailable;
    if budget <= 0 {
        return sizes;
    }
    for (size, set) in sizes.iter_mut().zip(olds) {
        let unhealthy = (*size - set.available).max(0).min(budget);
        *size -= unhealthy;
        budget -= unhealthy;
    }
    let available: i32 = new.available + olds.iter().map(|s| s.available).sum::<i32>();
    let mut to_remove = (available - min_available).max(0);
    for size in &mut sizes {
        let step = (*size).min(to_remove);
        *size -= step;
        to_remove -= step;
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(replicas: i32, available: i32) -> Set {
        Set {
            replicas,
            available,
        }
    }

    fn percent(p: &str) -> IntOrString {
        IntOrString::String(p.into())
    }

    #[test]
    fn percentages_round_surge_up_and_unavailability_down() {
        let limits = limits(1, None, None).expect("defaults");
        assert_eq!(
            limits,
            Limits {
                max_surge: 1,
                max_unavailable: 0
            }
        );
        let limits = limits_of(10, "25%", "25%");
        assert_eq!(
            limits,
            Limits {
                max_surge: 3,
                max_unavailable: 2
            }
        );
        let zero = IntOrString::Int(0);
        let both_zero = super::limits(3, Some(&zero), Some(&zero)).expect("zeros");
        assert_eq!(both_zero.max_unavailable, 1);
        assert!(super::limits(3, Some(&percent("x%")), None).is_err());
    }

    fn limits_of(replicas: i32, surge: &str, unavailable: &str) -> Limits {
        limits(replicas, Some(&percent(surge)), Some(&percent(unavailable))).expect("limits")
    }

    #[test]
    fn a_single_replica_surges_one_new_pod_before_the_old_goes() {
        let limits = limits(1, None, None).expect("defaults");
        let olds = [set(1, 1)];
        // The new ReplicaSet may grow to 1 beside the old pod.
        assert_eq!(new_replicas(1, limits, &set(0, 0), &olds), 1);
        // Until the new pod is available, the old one stays.
        assert_eq!(old_replicas(1, limits, &set(1, 0), &olds), vec![1]);
        // Then it goes.
        assert_eq!(old_replicas(1, limits, &set(1, 1), &olds), vec![0]);
    }

    #[test]
    fn the_surge_caps_the_new_replica_set() {
        let limits = limits_of(10, "20%", "0%");
        let olds = [set(10, 10)];
        assert_eq!(new_replicas(10, limits, &set(0, 0), &olds), 2);
        // At the cap nothing more is asked for.
        assert_eq!(new_replicas(10, limits, &set(2, 0), &olds), 2);
        // Two new pods available: two old ones may go.
        assert_eq!(old_replicas(10, limits, &set(2, 2), &olds), vec![8]);
    }

    #[test]
    fn unavailable_old_pods_go_first_and_oldest_sets_shrink_first() {
        let limits = limits_of(4, "0%", "50%");
        // Oldest first: 2 replicas none available, then 2 available.
        let olds = [set(2, 0), set(2, 2)];
        let sizes = old_replicas(4, limits, &set(0, 0), &olds);
        // The two unhealthy pods go; of the two available, none may go
        // (2 available = replicas - maxUnavailable).
        assert_eq!(sizes, vec![0, 2]);
    }

    #[test]
    fn a_new_replica_set_above_the_wanted_count_comes_down() {
        let limits = limits(2, None, None).expect("defaults");
        assert_eq!(new_replicas(2, limits, &set(3, 3), &[]), 2);
    }
}
