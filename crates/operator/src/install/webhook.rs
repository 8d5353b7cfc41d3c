//! The admission webhook's installation: the Service in front of the
//! operator's replicas, the ValidatingWebhookConfiguration that sends the
//! API server's PostgresCluster writes to it, and the PodDisruptionBudget
//! that keeps one replica serving it through a drain or a rollout.
//!
//! The configuration holds no `caBundle`: the operator injects its own
//! authority once it has made one (`crate::webhook::certify`). Until then,
//! and whenever no replica answers, `failurePolicy: Fail` refuses
//! PostgresCluster writes rather than letting an unchecked spec through;
//! the namespace selector leaves the operator's own namespace out, so the
//! webhook can never stand in the way of the operator's own objects.

use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{NAME, NAMESPACE, meta, selector_labels};
use crate::webhook::{CONFIGURATION, SERVICE, WEBHOOK_NAME, serve::PATH};

/// Seconds the API server waits for the webhook: it answers from memory,
/// in well under a second.
pub const TIMEOUT_SECONDS: i32 = 5;

/// The Service the API server reaches the webhook by.
pub fn webhook_service() -> Service {
    Service {
        metadata: meta(SERVICE, Some(NAMESPACE)),
        spec: Some(ServiceSpec {
            selector: Some(selector_labels()),
            ports: Some(vec![ServicePort {
                name: Some("webhook".to_owned()),
                port: 443,
                target_port: Some(IntOrString::String("webhook".to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| (*s).to_owned()).collect())
}

/// PostgresCluster creates and updates, from every namespace but the
/// operator's, go to the webhook.
pub fn validating_webhook_configuration() -> ValidatingWebhookConfiguration {
    let versions: Vec<String> = tusk_api::crds()
        .into_iter()
        .filter(|crd| crd.spec.names.kind == "PostgresCluster")
        .flat_map(|crd| crd.spec.versions.into_iter().filter(|v| v.served))
        .map(|v| v.name)
        .collect();
    ValidatingWebhookConfiguration {
        metadata: meta(CONFIGURATION, None),
        webhooks: Some(vec![ValidatingWebhook {
            name: WEBHOOK_NAME.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            client_config: WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: NAMESPACE.to_owned(),
                    name: SERVICE.to_owned(),
                    path: Some(PATH.to_owned()),
                    port: Some(443),
                }),
                ..WebhookClientConfig::default()
            },
            rules: Some(vec![RuleWithOperations {
                api_groups: strings(&[tusk_api::GROUP]),
                api_versions: Some(versions),
                operations: strings(&["CREATE", "UPDATE"]),
                resources: strings(&["postgresclusters"]),
                scope: Some("Namespaced".to_owned()),
            }]),
            failure_policy: Some("Fail".to_owned()),
            match_policy: Some("Equivalent".to_owned()),
            side_effects: "None".to_owned(),
            timeout_seconds: Some(TIMEOUT_SECONDS),
            namespace_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "kubernetes.io/metadata.name".to_owned(),
                    operator: "NotIn".to_owned(),
                    values: strings(&[NAMESPACE]),
                }]),
                ..LabelSelector::default()
            }),
            object_selector: Some(LabelSelector::default()),
            match_conditions: None,
        }]),
    }
}

/// One of the two replicas stays up through voluntary disruptions, so the
/// webhook always has a replica to answer.
pub fn pod_disruption_budget() -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(NAME, Some(NAMESPACE)),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_webhook_fails_closed_quickly_and_never_in_the_operators_namespace() {
        let configuration = validating_webhook_configuration();
        let webhook = configuration
            .webhooks
            .and_then(|w| w.into_iter().next())
            .expect("one webhook");
        assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
        assert!(webhook.timeout_seconds.is_some_and(|t| t <= 5));
        let selector = webhook.namespace_selector.expect("a namespace selector");
        let requirement = &selector.match_expressions.expect("expressions")[0];
        assert_eq!(requirement.key, "kubernetes.io/metadata.name");
        assert_eq!(requirement.operator, "NotIn");
        assert_eq!(requirement.values, strings(&[NAMESPACE]));
        let service = webhook.client_config.service.expect("a service");
        assert_eq!(service.name, SERVICE);
        assert_eq!(service.path.as_deref(), Some(PATH));
        assert!(
            webhook.client_config.ca_bundle.is_none(),
            "the operator injects it"
        );
    }

    #[test]
    fn the_budget_and_the_service_select_the_operators_pods() {
        let selected = |labels: Option<std::collections::BTreeMap<String, String>>| {
            labels.unwrap_or_default() == selector_labels()
        };
        assert!(selected(
            pod_disruption_budget()
                .spec
                .and_then(|s| s.selector)
                .and_then(|s| s.match_labels)
        ));
        assert!(selected(webhook_service().spec.and_then(|s| s.selector)));
    }
}
