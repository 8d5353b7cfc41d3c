//! The fingerprint of an instance's pod template, written on the pod as
//! the `tusk.dev/pod-template` annotation when it is created. A rolling
//! update compares it with the fingerprint of the pod the cluster declares
//! now: a pod is outdated when they differ, and the parts that differ say
//! why. Comparing fingerprints, not fields, is immune to the defaults the
//! API server fills into a stored pod.
//!
//! The text is `image=H,version=H,resources=H,podTemplate=H,pod=H`: one
//! hash per declared input (so a reason names the field), and one of the
//! whole pod (which also changes with the operator's version: its image is
//! the init container's, and its builders shape the pod).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use tusk_api::labels;

use crate::validate::ValidatedCluster;

/// What a template fingerprint covers, by name, with its hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(BTreeMap<String, String>);

/// The part of the fingerprint that covers the whole pod.
const POD: &str = "pod";

/// The declared inputs, by the field a reason names.
const INPUTS: [(&str, &str); 4] = [
    ("image", "spec.postgres.image"),
    ("version", "spec.postgres.version"),
    ("resources", "spec.resources"),
    ("podTemplate", "spec.podTemplate"),
];

/// Why a pod is outdated: the operator's version (its image or its
/// builders) changed the pod, with nothing the cluster declares.
pub const OPERATOR_VERSION: &str = "the operator's version";

impl Fingerprint {
    /// The fingerprint of `pod`, built for `cluster` without a role label
    /// or this annotation.
    pub fn of(cluster: &ValidatedCluster, pod: &Pod) -> Self {
        let mut parts = BTreeMap::new();
        parts.insert("image".to_owned(), hash(&cluster.image));
        parts.insert("version".to_owned(), hash(&cluster.version));
        parts.insert("resources".to_owned(), hash(&cluster.resources));
        parts.insert("podTemplate".to_owned(), hash(&cluster.pod_template));
        parts.insert(POD.to_owned(), hash(pod));
        Self(parts)
    }

    /// The annotation's text.
    pub fn text(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Reads the annotation of a live pod; `None` when it has none (a pod
    /// made by an operator version before fingerprints).
    pub fn of_live(pod: &Pod) -> Option<Self> {
        let text = pod
            .metadata
            .annotations
            .as_ref()?
            .get(labels::POD_TEMPLATE)?;
        let parts = text
            .split(',')
            .filter_map(|part| part.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Some(Self(parts))
    }

    /// Why a pod with fingerprint `live` (`None`: unknown) is not the pod
    /// `self` describes: the declared fields that changed, or the
    /// operator's version; empty when it is up to date.
    pub fn reasons(&self, live: Option<&Self>) -> Vec<&'static str> {
        let Some(live) = live else {
            return vec![OPERATOR_VERSION];
        };
        if live.0.get(POD) == self.0.get(POD) {
            return Vec::new();
        }
        let changed: Vec<&'static str> = INPUTS
            .iter()
            .filter(|(key, _)| live.0.get(*key) != self.0.get(*key))
            .map(|(_, field)| *field)
            .collect();
        if changed.is_empty() {
            vec![OPERATOR_VERSION]
        } else {
            changed
        }
    }
}

/// FNV-1a (64 bits) of the value's JSON: stable across builds and
/// platforms, unlike the standard library's hasher. Not for security: a
/// fingerprint only has to change when its input does.
fn hash(value: &impl Serialize) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        state ^= u64::from(byte);
        state = state.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{state:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{instance_pod, validated};
    use crate::config::OperatorConfig;

    fn spec(resources: serde_json::Value, version: i64) -> serde_json::Value {
        serde_json::json!({"instances": 2, "postgres": {"version": version},
            "storage": {"size": "1Gi"}, "resources": resources})
    }

    fn live(spec: serde_json::Value, config: &OperatorConfig) -> Pod {
        let cluster = validated(spec);
        instance_pod(&cluster, config, &cluster.name.instance(1), Some("primary"))
    }

    fn desired(spec: serde_json::Value, config: &OperatorConfig) -> Fingerprint {
        let cluster = validated(spec);
        crate::builders::pod_fingerprint(&cluster, config, &cluster.name.instance(1))
    }

    #[test]
    fn a_pod_is_outdated_exactly_when_its_template_changed_and_says_why() {
        let config = OperatorConfig::default();
        let newer = OperatorConfig {
            operator_image: "ghcr.io/tusk-dev/tusk:9.9.9".to_owned(),
            ..OperatorConfig::default()
        };
        let small = serde_json::json!({"requests": {"memory": "256Mi"}});
        let large = serde_json::json!({"requests": {"memory": "512Mi"}});
        let pod = live(spec(small.clone(), 15), &config);
        let stamped = Fingerprint::of_live(&pod);
        assert!(stamped.is_some(), "every pod carries its fingerprint");
        let cases: [(Fingerprint, Vec<&str>); 4] = [
            (desired(spec(small.clone(), 15), &config), vec![]),
            (
                desired(spec(large.clone(), 15), &config),
                vec!["spec.resources"],
            ),
            (
                desired(spec(small.clone(), 15), &newer),
                vec![OPERATOR_VERSION],
            ),
            (
                desired(spec(large, 16), &config),
                vec![
                    "spec.postgres.image",
                    "spec.postgres.version",
                    "spec.resources",
                ],
            ),
        ];
        for (desired, reasons) in cases {
            assert_eq!(desired.reasons(stamped.as_ref()), reasons, "{desired:?}");
        }
        // A pod from before fingerprints is outdated by the operator.
        let unknown = desired(spec(small, 15), &config);
        assert_eq!(unknown.reasons(None), vec![OPERATOR_VERSION]);
    }

    #[test]
    fn the_role_label_is_not_part_of_the_template() {
        let config = OperatorConfig::default();
        let cluster = validated(spec(serde_json::json!({}), 15));
        let instance = cluster.name.instance(1);
        let primary = instance_pod(&cluster, &config, &instance, Some("primary"));
        let unlabelled = instance_pod(&cluster, &config, &instance, None);
        assert_eq!(
            Fingerprint::of_live(&primary),
            Fingerprint::of_live(&unlabelled)
        );
    }
}
