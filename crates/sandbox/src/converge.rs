//! What `tusk sandbox up --apply` does with manifests: install Tusk's CRDs,
//! server-side apply every document, and tell which applied objects have
//! not converged yet (so the command can show what it is waiting for).
//!
//! An object has converged when its status says so: a `Ready` condition
//! that is True, or else a phase that means done (`Running`, `Ready`,
//! `Bound`, `Succeeded`, `Active`). Objects without status (Services,
//! Secrets) converge once they exist.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiResource, Scope};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::yaml11;

/// The field manager of everything `tusk sandbox up` applies.
pub const MANAGER: &str = "tusk-sandbox";

#[derive(Debug, thiserror::Error)]
pub enum ConvergeError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: document {index} is not a Kubernetes object: {message}")]
    Parse {
        path: PathBuf,
        index: usize,
        message: String,
    },
    #[error("the API server does not serve {api_version} {kind}: {source}")]
    UnknownKind {
        api_version: String,
        kind: String,
        source: kube::Error,
    },
    #[error("cannot apply {kind} {name}: {source}")]
    Apply {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("CustomResourceDefinition {0} was not served in time")]
    CrdNotServed(String),
}

/// An object that was applied, to follow until it converges.
#[derive(Clone, Debug)]
pub struct Applied {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
}

impl Applied {
    fn api(&self, client: &Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }

    /// `kind namespace/name`, as progress shows it.
    pub fn describe(&self) -> String {
        let kind = self.resource.kind.to_lowercase();
        match &self.namespace {
            Some(namespace) => format!("{kind} {namespace}/{}", self.name),
            None => format!("{kind} {}", self.name),
        }
    }
}

/// Reads every non-empty YAML document of a manifest file, as kubectl
/// reads them (YAML 1.1: an unquoted `off` is `false`; see [`crate::yaml11`]).
pub fn read_manifests(path: &Path) -> Result<Vec<Value>, ConvergeError> {
    Ok(read_manifest_documents(path)?
        .into_iter()
        .map(|document| document.value)
        .collect())
}

/// [`read_manifests`], with each document's scalars that YAML 1.1 read as
/// booleans or numbers, so a refusal can say which to quote.
pub fn read_manifest_documents(path: &Path) -> Result<Vec<yaml11::Document>, ConvergeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConvergeError::Read {
        path: path.to_owned(),
        source,
    })?;
    let parse = |index: usize, message: String| ConvergeError::Parse {
        path: path.to_owned(),
        index,
        message,
    };
    let mut documents = Vec::new();
    let read = yaml11::documents(&text).map_err(|error| parse(error.document, error.message))?;
    for (index, document) in read.into_iter().enumerate() {
        let value = &document.value;
        if value.is_null() {
            continue;
        }
        if value.get("kind").and_then(Value::as_str).is_none()
            || value.get("apiVersion").and_then(Value::as_str).is_none()
        {
            return Err(parse(index, "it has no apiVersion or kind".into()));
        }
        documents.push(document);
    }
    Ok(documents)
}

/// Server-side applies Tusk's CRDs and waits until the API serves them.
pub async fn install_crds(client: &Client) -> Result<(), ConvergeError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(MANAGER).force();
    for crd in tusk_api::crds() {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|source| ConvergeError::Apply {
                kind: "CustomResourceDefinition".into(),
                name: name.clone(),
                source,
            })?;
        let group = crd.spec.group.clone();
        let kind = crd.spec.names.kind.clone();
        let version = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
            .unwrap_or_default();
        let gvk = GroupVersionKind::gvk(&group, &version, &kind);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while discovery::pinned_kind(client, &gvk).await.is_err() {
            if tokio::time::Instant::now() > deadline {
                return Err(ConvergeError::CrdNotServed(name));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Server-side applies each document (namespaced kinds default to
/// `default`).
pub async fn apply(client: &Client, documents: &[Value]) -> Result<Vec<Applied>, ConvergeError> {
    let mut applied = Vec::new();
    for document in documents {
        let api_version = document["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let kind = document["kind"].as_str().unwrap_or_default().to_owned();
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let (resource, capabilities) =
            discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|source| ConvergeError::UnknownKind {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    source,
                })?;
        let name = document["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let namespace = (capabilities.scope == Scope::Namespaced).then(|| {
            document["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned()
        });
        let target = Applied {
            resource,
            namespace,
            name: name.clone(),
        };
        target
            .api(client)
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(document),
            )
            .await
            .map_err(|source| ConvergeError::Apply {
                kind: kind.clone(),
                name: name.clone(),
                source,
            })?;
        applied.push(target);
    }
    Ok(applied)
}

/// Whether a kind reports its progress in `status` (so an object without
/// one has not been acted on yet): pods, claims, Deployments and custom
/// resources.
fn reports_status(resource: &ApiResource) -> bool {
    matches!(
        resource.kind.as_str(),
        "Pod" | "PersistentVolumeClaim" | "Deployment"
    ) || (resource.group.contains('.') && !resource.group.ends_with("k8s.io"))
}

/// Why an object has not converged yet, or `None` when it has.
/// `reports_status`: an object of this kind without status is still
/// waiting to be acted on.
pub fn not_converged(object: &Value, reports_status: bool) -> Option<String> {
    let status = object
        .get("status")
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()));
    let Some(status) = status else {
        return reports_status.then(|| "no status yet".to_owned());
    };
    let generation = object["metadata"]["generation"].as_i64();
    let observed = status["observedGeneration"].as_i64();
    if let (Some(generation), Some(observed)) = (generation, observed)
        && observed < generation
    {
        return Some(format!("generation {generation} not observed yet"));
    }
    if let Some(conditions) = status.get("conditions").and_then(Value::as_array)
        && let Some(ready) = conditions
            .iter()
            .find(|c| c["type"] == "Ready")
            .or_else(|| conditions.iter().find(|c| c["type"] == "Available"))
    {
        if ready["status"] == "True" {
            return None;
        }
        let reason = ready["reason"]
            .as_str()
            .or_else(|| status["phase"].as_str())
            .unwrap_or("not ready");
        return Some(waiting_detail(object).unwrap_or_else(|| reason.to_owned()));
    }
    match status.get("phase").and_then(Value::as_str) {
        None | Some("Running" | "Ready" | "Bound" | "Succeeded" | "Active") => None,
        Some(phase) => Some(waiting_detail(object).unwrap_or_else(|| phase.to_owned())),
    }
}

/// A container's waiting reason says more than "ContainersNotReady".
fn waiting_detail(object: &Value) -> Option<String> {
    object["status"]["containerStatuses"]
        .as_array()?
        .iter()
        .chain(
            object["status"]["initContainerStatuses"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .find_map(|s| {
            s["state"]["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
        })
}

/// The applied objects that have not converged, with why.
pub async fn waiting_for(client: &Client, applied: &[Applied]) -> Vec<String> {
    let mut waiting = Vec::new();
    for target in applied {
        match target.api(client).get_opt(&target.name).await {
            Ok(Some(object)) => {
                let value = serde_json::to_value(&object).unwrap_or(Value::Null);
                if let Some(why) = not_converged(&value, reports_status(&target.resource)) {
                    waiting.push(format!("{} ({why})", target.describe()));
                }
            }
            Ok(None) => waiting.push(format!("{} (not found)", target.describe())),
            Err(error) => waiting.push(format!("{} ({error})", target.describe())),
        }
    }
    waiting
}

/// Shows what the applied objects wait for until all have converged: one
/// live status line on a terminal (`live`), else a line per change.
pub async fn show_progress(
    client: &Client,
    applied: &[Applied],
    out: &mut impl std::io::Write,
    live: bool,
) -> std::io::Result<()> {
    let started = tokio::time::Instant::now();
    let mut last = String::new();
    let spinner = ['|', '/', '-', '\\'];
    for tick in 0usize.. {
        let waiting = waiting_for(client, applied).await;
        let elapsed = started.elapsed().as_secs();
        if waiting.is_empty() {
            let done = format!(
                "all {} applied objects converged after {elapsed}s",
                applied.len()
            );
            if live {
                write!(out, "\r\x1b[2K")?;
            }
            writeln!(out, "{done}")?;
            return out.flush();
        }
        let mut line = format!("waiting for {}", waiting.join(", "));
        if line.len() > 150 {
            let cut = (0..=150)
                .rev()
                .find(|i| line.is_char_boundary(*i))
                .unwrap_or(0);
            line.truncate(cut);
            line.push_str("...");
        }
        if live {
            write!(
                out,
                "\r\x1b[2K{} [{elapsed}s] {line}",
                spinner[tick % spinner.len()]
            )?;
            out.flush()?;
        } else if line != last {
            writeln!(out, "[{elapsed}s] {line}")?;
        }
        last = line;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn readiness_and_phases_decide_convergence() {
        assert_eq!(not_converged(&json!({"kind": "Service"}), false), None);
        // A Deployment without a Ready condition waits to be Available.
        let deployment = |available: &str| {
            json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
                "conditions": [{"type": "Available", "status": available, "reason": "MinimumReplicasUnavailable"}]}})
        };
        assert_eq!(
            not_converged(&deployment("False"), true),
            Some("MinimumReplicasUnavailable".into())
        );
        assert_eq!(not_converged(&deployment("True"), true), None);
        assert_eq!(
            not_converged(&json!({"kind": "PostgresCluster"}), true),
            Some("no status yet".into())
        );
        assert_eq!(
            not_converged(
                &json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
                "containerStatuses": [{"state": {"waiting": {"reason": "ImageNotMapped"}}}]}}),
                true
            ),
            Some("ImageNotMapped".into())
        );
        assert_eq!(
            not_converged(
                &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                true
            ),
            None
        );
        assert_eq!(
            not_converged(
                &json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 2,
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
                true
            ),
            Some("generation 3 not observed yet".into())
        );
        assert_eq!(
            not_converged(&json!({"status": {"phase": "Pending"}}), true),
            Some("Pending".into())
        );
        assert_eq!(
            not_converged(&json!({"status": {"phase": "Bound"}}), true),
            None
        );
    }

    #[test]
    fn manifests_split_into_documents() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("m.yaml");
        std::fs::write(&path, "---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n").expect("write");
        let documents = read_manifests(&path).expect("parse");
        assert_eq!(documents.len(), 2);
        std::fs::write(&path, "metadata: {name: a}\n").expect("write");
        assert!(matches!(
            read_manifests(&path),
            Err(ConvergeError::Parse { .. })
        ));
    }

    /// `tusk sandbox up --apply` sends what `kubectl apply` would: an
    /// unquoted `on` is `true` in YAML 1.1, a quoted one a string.
    #[test]
    fn manifests_are_read_as_kubectl_reads_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("m.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {plain: on, quoted: 'on'}\n",
        )
        .expect("write");
        let documents = read_manifests(&path).expect("parse");
        assert_eq!(documents[0]["data"], json!({"plain": true, "quoted": "on"}));
    }
}
