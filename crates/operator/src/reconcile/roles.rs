//! Role labels: `tusk.dev/role` follows what each instance reports, so the
//! Services select the right pods. Pure.
//!
//! An instance that did not answer keeps its label (a missed poll must not
//! take the primary out of `-rw`), unless it is the primary and its lease
//! has gone quiet too: its manager neither renews nor answers, so it is
//! most likely hung, and new connections through `-rw` are better refused
//! at once than left hanging on it until the failover (it gets the label
//! back as soon as it answers as the primary). Only the target primary
//! reporting `primary` is labelled primary, and a former primary loses the
//! label the moment another instance is chosen (fencing).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::labels;

/// A pod whose role label changes: to `role`, or removed when `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleLabel {
    pub pod: String,
    pub role: Option<&'static str>,
}

/// The role labels to change so the pods say what their instances report;
/// `lease_quiet`: the primary lease has gone quiet (its holder stopped
/// renewing it).
pub fn role_labels(
    pods: &[Pod],
    reports: &BTreeMap<String, InstanceReport>,
    target_primary: &str,
    lease_quiet: bool,
) -> Vec<RoleLabel> {
    pods.iter()
        .filter_map(|pod| {
            let name = pod.name_any();
            let current = pod.labels().get(labels::ROLE).map(String::as_str);
            let wanted = wanted(
                reports.get(&name).map(|r| r.role),
                name == target_primary,
                current,
                lease_quiet,
            );
            (current != wanted).then(|| RoleLabel {
                pod: name,
                role: wanted.and_then(as_label),
            })
        })
        .collect()
}

fn wanted(
    reported: Option<InstanceRole>,
    is_target: bool,
    current: Option<&str>,
    lease_quiet: bool,
) -> Option<&str> {
    match (reported, is_target) {
        (Some(InstanceRole::Primary), true) => Some(labels::role::PRIMARY),
        (Some(InstanceRole::Replica), _) => Some(labels::role::REPLICA),
        (Some(_), _) => None,
        (None, true) if !lease_quiet => current,
        (None, _) => current.filter(|c| *c != labels::role::PRIMARY),
    }
}

fn as_label(role: &str) -> Option<&'static str> {
    [labels::role::PRIMARY, labels::role::REPLICA]
        .into_iter()
        .find(|known| *known == role)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, role: Option<&str>) -> Pod {
        let labels = role.map_or(
            serde_json::json!({}),
            |r| serde_json::json!({labels::ROLE: r}),
        );
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels}}))
            .expect("a pod")
    }

    fn report(name: &str, role: InstanceRole) -> (String, InstanceReport) {
        let report = serde_json::from_value(serde_json::json!({
            "name": name, "role": role.as_str(), "phase": "running", "ready": true, "fenced": false,
        }))
        .expect("a report");
        (name.to_owned(), report)
    }

    /// The label now, the reported role, whether it is the target, whether
    /// the lease is quiet; the label wanted.
    type Case = (
        Option<&'static str>,
        Option<InstanceRole>,
        bool,
        bool,
        Option<&'static str>,
    );

    #[test]
    fn labels_follow_reports_and_only_the_target_is_primary() {
        use InstanceRole::*;
        // (label now, reported role, is the target, lease quiet, label wanted)
        let cases: [Case; 12] = [
            (None, Some(Primary), true, false, Some("primary")),
            (Some("primary"), Some(Primary), false, false, None),
            (Some("primary"), Some(Replica), true, false, Some("replica")),
            (None, Some(Replica), false, false, Some("replica")),
            (Some("replica"), Some(Stopped), false, false, None),
            // A missed poll keeps the label, but never `primary` on an
            // instance that is no longer the target.
            (Some("primary"), None, true, false, Some("primary")),
            (Some("primary"), None, false, false, None),
            (Some("replica"), None, false, false, Some("replica")),
            // Silent with its lease quiet: out of `-rw` until it answers.
            (Some("primary"), None, true, true, None),
            (None, Some(Primary), true, true, Some("primary")),
            (Some("replica"), None, false, true, Some("replica")),
            (Some("replica"), None, true, true, Some("replica")),
        ];
        for (label, reported, is_target, quiet, expected) in cases {
            let pods = [pod("db-2", label)];
            let reports: BTreeMap<_, _> = reported.map(|r| report("db-2", r)).into_iter().collect();
            let target = if is_target { "db-2" } else { "db-1" };
            let changes = role_labels(&pods, &reports, target, quiet);
            let wanted = changes.first().map_or(label, |c| c.role);
            assert_eq!(
                wanted, expected,
                "{label:?} {reported:?} target {is_target} quiet {quiet}"
            );
            assert_eq!(changes.is_empty(), label == expected);
        }
    }
}
