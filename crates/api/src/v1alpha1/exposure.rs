//! How a cluster is reached from outside and what identity its pods carry
//! to cloud services: the Services' type and annotations (`spec.services`)
//! and the ServiceAccount's annotations (`spec.serviceAccount`), for
//! load balancers and workload identity.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules;

/// The cluster's three Services, each as declared (absent: `ClusterIP`
/// with no annotations).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ServicesSpec {
    /// `<cluster>-rw`: the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rw: Option<ServiceTemplate>,
    /// `<cluster>-ro`: the replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ro: Option<ServiceTemplate>,
    /// `<cluster>-r`: every instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r: Option<ServiceTemplate>,
}

/// What may be declared of one of the cluster's Services; its selector,
/// ports and name stay the operator's.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplate {
    /// `ClusterIP` (the default), `NodePort` or `LoadBalancer`.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// Annotations on the Service (a cloud load balancer's settings, say).
    /// Keys under `tusk.dev/` are the operator's and cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = rules::no_operator_keys("annotations"))]
    pub annotations: BTreeMap<String, String>,
    /// Extra labels on the Service. Keys under `tusk.dev/` are the
    /// operator's and cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = rules::no_operator_keys("labels"))]
    pub labels: BTreeMap<String, String>,
    /// With `type: LoadBalancer`: the client address blocks (CIDR) the
    /// load balancer admits. Empty: every address the provider allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 64))]
    pub load_balancer_source_ranges: Vec<String>,
}

/// How a Service is exposed (Kubernetes' Service types that route to
/// pods).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ServiceType {
    /// A cluster-internal address only.
    #[default]
    ClusterIP,
    /// A port on every node as well.
    NodePort,
    /// A load balancer of the cloud provider as well.
    LoadBalancer,
}

impl ServiceType {
    /// The name Kubernetes gives the type.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// What may be declared of the cluster's ServiceAccount, under which its
/// pods run (`<cluster>-instance`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSpec {
    /// Annotations on the ServiceAccount: workload identity, such as
    /// `iam.gke.io/gcp-service-account` or `eks.amazonaws.com/role-arn`,
    /// which object stores with ambient credentials use. Keys under
    /// `tusk.dev/` are the operator's and cannot be set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = rules::no_operator_keys("annotations"))]
    pub annotations: BTreeMap<String, String>,
}
