//! The operator's Deployment, its namespace and its metrics Service.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, Namespace, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::builders::container::{field_env, restricted, runtime_default, value_env};
use crate::config::setting;
use crate::webhook::PORT as WEBHOOK_PORT;

use super::{
    HTTP_PORT, NAME, NAMESPACE, meta, operator_image, postgres_image_template, selector_labels,
};

/// The user of the operator image (deploy/images/operator/Dockerfile).
const OPERATOR_UID: i64 = 65532;

pub fn namespace() -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            // Pods here (the operator's) meet the restricted Pod Security
            // Standard; enforcing it keeps it that way.
            labels: Some(
                super::install_labels()
                    .into_iter()
                    .chain([(
                        "pod-security.kubernetes.io/enforce".to_owned(),
                        "restricted".to_owned(),
                    )])
                    .collect(),
            ),
            ..meta(NAMESPACE, None)
        },
        ..Namespace::default()
    }
}

pub fn deployment() -> Deployment {
    let template_meta = ObjectMeta {
        labels: Some(super::install_labels()),
        ..ObjectMeta::default()
    };
    Deployment {
        metadata: meta(NAME, Some(NAMESPACE)),
        spec: Some(DeploymentSpec {
            // Both replicas serve the admission webhook (its
            // PodDisruptionBudget keeps one up); one reconciles at a time
            // (leader election), and the other takes over within a lease.
            replicas: Some(2),
            selector: LabelSelector {
                match_labels: Some(selector_labels()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(template_meta),
                spec: Some(PodSpec {
                    service_account_name: Some(NAME.to_owned()),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(OPERATOR_UID),
                        run_as_group: Some(OPERATOR_UID),
                        seccomp_profile: Some(runtime_default()),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![operator_container()],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn operator_container() -> Container {
    let probe = |path: &str, period: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String("http".to_owned()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(2),
        failure_threshold: Some(3),
        ..Probe::default()
    };
    let quantities = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect::<BTreeMap<_, _>>()
    };
    Container {
        name: "operator".to_owned(),
        image: Some(operator_image()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(vec![
            "operator".to_owned(),
            format!("--http-address=0.0.0.0:{HTTP_PORT}"),
            format!("--webhook-address=0.0.0.0:{WEBHOOK_PORT}"),
        ]),
        env: Some(environment()),
        ports: Some(vec![
            ContainerPort {
                name: Some("http".to_owned()),
                container_port: HTTP_PORT,
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some("webhook".to_owned()),
                container_port: WEBHOOK_PORT,
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            },
        ]),
        liveness_probe: Some(probe("/healthz", 10)),
        readiness_probe: Some(probe("/readyz", 5)),
        // Memory grows with the number of watched pods, claims and secrets;
        // no CPU limit, so reconciles are not throttled during a failover.
        resources: Some(ResourceRequirements {
            requests: Some(quantities(&[("cpu", "100m"), ("memory", "64Mi")])),
            limits: Some(quantities(&[("memory", "256Mi")])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(restricted()),
        ..Container::default()
    }
}

fn environment() -> Vec<EnvVar> {
    let field = field_env;
    let value = value_env;
    vec![
        // Leader election: the Lease lives in the operator's namespace and
        // names the pod holding it.
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
        // The instance manager injected into PostgreSQL pods is this very
        // image, so operator and instance managers share one version.
        value(setting::OPERATOR_IMAGE, operator_image()),
        value(setting::DEFAULT_POSTGRES_IMAGE, postgres_image_template()),
        // glibc gives every thread that allocates an arena of its own (up
        // to eight per core), each keeping freed memory; two are plenty
        // for the operator's few threads and keep its footprint small
        // (docs/benchmarks.md).
        value("MALLOC_ARENA_MAX", "2".to_owned()),
    ]
}

pub fn metrics_service() -> Service {
    Service {
        metadata: ObjectMeta {
            annotations: Some(BTreeMap::from([
                ("prometheus.io/scrape".to_owned(), "true".to_owned()),
                ("prometheus.io/port".to_owned(), HTTP_PORT.to_string()),
            ])),
            ..meta(&format!("{NAME}-metrics"), Some(NAMESPACE))
        },
        spec: Some(ServiceSpec {
            selector: Some(selector_labels()),
            ports: Some(vec![ServicePort {
                name: Some("metrics".to_owned()),
                port: HTTP_PORT,
                target_port: Some(IntOrString::String("http".to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container() -> Container {
        deployment()
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers)
            .and_then(|c| c.into_iter().next())
            .expect("one container")
    }

    #[test]
    fn the_operator_runs_restricted() {
        let security = container().security_context.expect("security context");
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(
            security.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_owned()])
        );
        assert_eq!(
            security.seccomp_profile.map(|p| p.type_).as_deref(),
            Some("RuntimeDefault")
        );
    }

    #[test]
    fn probes_ask_the_operators_health_endpoints() {
        let container = container();
        let path = |probe: Option<Probe>| probe.and_then(|p| p.http_get).and_then(|h| h.path);
        assert_eq!(path(container.liveness_probe).as_deref(), Some("/healthz"));
        assert_eq!(path(container.readiness_probe).as_deref(), Some("/readyz"));
        let args = container.args.unwrap_or_default();
        assert!(args.contains(&format!("--http-address=0.0.0.0:{HTTP_PORT}")));
        assert!(args.contains(&format!("--webhook-address=0.0.0.0:{WEBHOOK_PORT}")));
    }

    #[test]
    fn the_deployment_runs_and_injects_the_image_of_this_version() {
        let container = container();
        assert_eq!(container.image, Some(operator_image()));
        let injected = container
            .env
            .unwrap_or_default()
            .into_iter()
            .find(|e| e.name == setting::OPERATOR_IMAGE)
            .and_then(|e| e.value);
        assert_eq!(injected, Some(operator_image()));
    }

    /// `tusk plan` reads the operator's settings back from this container.
    #[test]
    fn the_deployments_settings_read_back_as_the_operators() {
        let (config, unresolved) =
            crate::config::OperatorConfig::from_container(&container()).expect("settings");
        assert!(unresolved.is_empty(), "{unresolved:?}");
        assert_eq!(config.operator_image, operator_image());
        assert_eq!(config.default_postgres_image, postgres_image_template());
    }

    #[test]
    fn the_metrics_service_selects_the_operator_pods() {
        let template = deployment()
            .spec
            .expect("spec")
            .template
            .metadata
            .expect("meta");
        let pod_labels = template.labels.unwrap_or_default();
        let selector = metrics_service()
            .spec
            .and_then(|s| s.selector)
            .unwrap_or_default();
        assert!(!selector.is_empty());
        for (key, value) in selector {
            assert_eq!(pod_labels.get(&key), Some(&value));
        }
    }
}
