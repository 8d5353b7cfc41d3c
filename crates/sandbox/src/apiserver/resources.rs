//! The resource registry: which kinds the server serves, under which group,
//! version and plural, and how each behaves (scope, subresources, printer
//! columns, schema).
//!
//! Built-in kinds are a fixed table; custom kinds are added and removed as
//! CustomResourceDefinitions come and go, so a kind is served the moment its
//! CRD is created.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tusk_api::admission::AdmissionSchema;

/// One printer column of a custom resource (`additionalPrinterColumns`).
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One version of a served resource.
#[derive(Clone, Debug)]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    /// The openAPIV3Schema of a custom resource version, its checks
    /// compiled when the CRD is stored (shared: a lookup clones the resource).
    pub schema: Option<Arc<AdmissionSchema>>,
    pub printer_columns: Vec<PrinterColumn>,
    pub status_subresource: bool,
    /// The scale subresource a custom resource version declares.
    pub scale: Option<ScalePaths>,
}

/// Where an object keeps what its scale subresource shows: JSON paths
/// (`.spec.replicas`) as a CRD's `subresources.scale` gives them, or those
/// of the built-in workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    /// A path to the selector as a string (CRDs' `labelSelectorPath`).
    pub label_selector: Option<String>,
    /// The selector is the object's `spec.selector`, written out as a
    /// string (Deployments and ReplicaSets).
    pub spec_selector: bool,
}

impl ScalePaths {
    /// What Deployments and ReplicaSets show.
    pub fn workload() -> Self {
        Self {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
            spec_selector: true,
        }
    }
}

/// A kind the server serves.
#[derive(Clone, Debug)]
pub struct Resource {
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub versions: Vec<Version>,
    /// Defined by a CRD (schema validation, pruning, defaulting, no strategic
    /// merge patch).
    pub custom: bool,
    /// The storage key shared by every version: `group/plural`.
    pub key: String,
}

impl Resource {
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    pub fn version(&self, name: &str) -> Option<&Version> {
        self.versions.iter().find(|v| v.name == name && v.served)
    }

    pub fn scale(&self, version: &str) -> Option<&ScalePaths> {
        self.version(version).and_then(|v| v.scale.as_ref())
    }

    pub fn has_status(&self, version: &str) -> bool {
        self.version(version).is_some_and(|v| v.status_subresource)
    }

    /// `Kind.group` as Kubernetes names a kind in error messages.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// `plural.group` as Kubernetes names a resource in error messages.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether writes to the main resource bump `metadata.generation` (and
    /// the object carries one at all).
    pub fn tracks_generation(&self) -> bool {
        self.custom
            || matches!(
                self.kind.as_str(),
                "CustomResourceDefinition"
                    | "PodDisruptionBudget"
                    | "NetworkPolicy"
                    | "Pod"
                    | "Deployment"
                    | "ReplicaSet"
            )
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
    short: &'static [&'static str],
}

const BUILTINS: &[Builtin] = &[
    b("", "v1", "namespaces", "Namespace", false, true, &["ns"]),
    b("", "v1", "pods", "Pod", true, true, &["po"]),
    b("", "v1", "services", "Service", true, true, &["svc"]),
    b("", "v1", "endpoints", "Endpoints", true, false, &["ep"]),
    b("", "v1", "configmaps", "ConfigMap", true, false, &["cm"]),
    b("", "v1", "secrets", "Secret", true, false, &[]),
    b(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        true,
        &["pvc"],
    ),
    b(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        true,
        &["pv"],
    ),
    b(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        false,
        &["sa"],
    ),
    b("", "v1", "nodes", "Node", false, true, &["no"]),
    b("", "v1", "events", "Event", true, false, &["ev"]),
    b(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        false,
        &["ev"],
    ),
    b(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        true,
        &["pdb"],
    ),
    b(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        false,
        &["netpol"],
    ),
    b(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        true,
        &["deploy"],
    ),
    b(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        true,
        &["rs"],
    ),
    b(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        false,
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        false,
        &[],
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        false,
        &[],
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
        false,
        &[],
    ),
    b(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        true,
        &["crd", "crds"],
    ),
];

const fn b(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
    short: &'static [&'static str],
) -> Builtin {
    Builtin {
        group,
        version,
        plural,
        kind,
        namespaced,
        status,
        short,
    }
}

/// Every kind currently served, keyed by `group/plural`.
#[derive(Default)]
pub struct Registry {
    resources: RwLock<BTreeMap<String, Resource>>,
}

pub fn key(group: &str, plural: &str) -> String {
    format!("{group}/{plural}")
}

impl Registry {
    pub fn with_builtins() -> Self {
        let registry = Self::default();
        for builtin in BUILTINS {
            registry.insert(Resource {
                group: builtin.group.to_owned(),
                plural: builtin.plural.to_owned(),
                singular: builtin.kind.to_lowercase(),
                kind: builtin.kind.to_owned(),
                namespaced: builtin.namespaced,
                short_names: builtin.short.iter().map(|s| (*s).to_owned()).collect(),
                categories: Vec::new(),
                versions: vec![Version {
                    name: builtin.version.to_owned(),
                    served: true,
                    storage: true,
                    schema: None,
                    printer_columns: Vec::new(),
                    status_subresource: builtin.status,
                    // Deployments and ReplicaSets have the scale
                    // subresource.
                    scale: (builtin.group == "apps"
                        && matches!(builtin.kind, "Deployment" | "ReplicaSet"))
                    .then(ScalePaths::workload),
                }],
                custom: false,
                key: key(builtin.group, builtin.plural),
            });
        }
        registry
    }

    pub fn insert(&self, resource: Resource) {
        if let Ok(mut map) = self.resources.write() {
            map.insert(resource.key.clone(), resource);
        }
    }

    pub fn remove(&self, key: &str) {
        if let Ok(mut map) = self.resources.write() {
            map.remove(key);
        }
    }

    /// The resource served at `group/version/plural`, if that version is
    /// served.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Resource> {
        let map = self.resources.read().ok()?;
        let resource = map.get(&key(group, plural))?;
        resource.version(version)?;
        Some(resource.clone())
    }

    pub fn by_key(&self, key: &str) -> Option<Resource> {
        self.resources.read().ok()?.get(key).cloned()
    }

    pub fn all(&self) -> Vec<Resource> {
        self.resources
            .read()
            .map(|map| map.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The resource whose objects carry `apiVersion`/`kind` (for owner
    /// references and events).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Resource> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.all()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind && r.version(version).is_some())
    }
}
