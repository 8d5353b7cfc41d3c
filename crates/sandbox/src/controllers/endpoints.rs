//! The endpoints controller: keeps each Service's Endpoints in line with
//! the pods its selector picks and their readiness.
//!
//! A pod is an address of the Service once it has an IP and is not being
//! deleted; it is under `addresses` while its Ready condition is True and
//! under `notReadyAddresses` otherwise, which is what gates traffic (the
//! proxy forwards only to `addresses`). A Service with
//! `publishNotReadyAddresses` has every such pod under `addresses`, ready
//! or not, pods being deleted included, as Kubernetes' endpoints
//! controller tolerates unready endpoints and includes terminating pods
//! for it. Services without a selector are left alone: their Endpoints
//! belong to whoever wrote them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::informer::Informer;

/// Marks Endpoints this controller owns, as Kubernetes' controller does.
const MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
const CONTROLLER: &str = "endpoint-controller";

#[derive(Debug, thiserror::Error)]
pub enum EndpointsError {
    #[error("cannot write Endpoints {namespace}/{name}: {source}")]
    Write {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.labels();
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The container port a Service port targets on `pod`.
fn target_port(target: Option<&IntOrString>, port: i32, pod: &Pod) -> Option<i32> {
    match target {
        None => Some(port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port),
    }
}

/// The `subsets` a Service should have: pods grouped by the ports they
/// resolve to, addresses sorted so equal sets compare equal.
pub fn subsets(service: &Service, pods: &[std::sync::Arc<Pod>]) -> Vec<Value> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let namespace = service.namespace().unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let mut groups: BTreeMap<String, (Value, Vec<Value>, Vec<Value>)> = BTreeMap::new();
    for pod in pods {
        if pod.namespace().as_deref() != Some(namespace.as_str())
            || !selects(selector, pod)
            || (pod.metadata.deletion_timestamp.is_some() && !publish_not_ready)
        {
            continue;
        }
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let ports: Vec<Value> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                let port = target_port(p.target_port.as_ref(), p.port, pod)?;
                let mut value = json!({"port": port, "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into())});
                if let Some(name) = &p.name {
                    value["name"] = json!(name);
                }
                Some(value)
            })
            .collect();
        let address = json!({
            "ip": ip,
            "nodeName": pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            "targetRef": {
                "kind": "Pod",
                "namespace": namespace,
                "name": pod.name_any(),
                "uid": pod.uid(),
            },
        });
        let key = Value::Array(ports.clone()).to_string();
        let group = groups
            .entry(key)
            .or_insert_with(|| (Value::Array(ports), Vec::new(), Vec::new()));
        if publish_not_ready || is_ready(pod) {
            group.1.push(address);
        } else {
            group.2.push(address);
        }
    }
    groups
        .into_values()
        .map(|(ports, mut ready, mut not_ready)| {
            let by_ip = |a: &Value, b: &Value| a["ip"].as_str().cmp(&b["ip"].as_str());
            ready.sort_by(by_ip);
            not_ready.sort_by(by_ip);
            let mut subset = json!({"ports": ports});
            if !ready.is_empty() {
                subset["addresses"] = json!(ready);
            }
            if !not_ready.is_empty() {
                subset["notReadyAddresses"] = json!(not_ready);
            }
            subset
        })
        .collect()
}

fn current_subsets(endpoints: &Endpoints) -> Value {
    serde_json::to_value(endpoints.subsets.clone().unwrap_or_default()).unwrap_or(Value::Null)
}

async fn write(
    client: &Client,
    service: &Service,
    existing: Option<&Endpoints>,
    subsets: Vec<Value>,
) -> Result<Option<Endpoints>, EndpointsError> {
    let namespace = service.namespace().unwrap_or_default();
    let name = service.name_any();
    let error = |source| EndpointsError::Write {
        namespace: namespace.clone(),
        name: name.clone(),
        source,
    };
    let normalized: Endpoints = serde_json::from_value(json!({"subsets": subsets}))
        .map_err(|e| error(kube::Error::SerdeError(e)))?;
    if let Some(existing) = existing
        && current_subsets(existing) == current_subsets(&normalized)
    {
        return Ok(None);
    }
    let api: Api<Endpoints> = Api::namespaced(client.clone(), &namespace);
    let mut labels = service.labels().clone();
    labels.insert(MANAGED_BY.into(), CONTROLLER.into());
    let mut object: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "subsets": subsets,
    }))
    .map_err(|e| error(kube::Error::SerdeError(e)))?;
    let written = match existing {
        Some(existing) => {
            object.metadata.resource_version = existing.resource_version();
            api.replace(&name, &PostParams::default(), &object).await
        }
        None => api.create(&PostParams::default(), &object).await,
    };
    written.map(Some).map_err(error)
}

/// The newer of the cached Endpoints and the one this controller last
/// wrote: right after a write the cache may not have seen it yet, and
/// writing against the older version would only conflict.
fn newest<'a>(
    cached: Option<&'a Endpoints>,
    written: Option<&'a Endpoints>,
) -> Option<&'a Endpoints> {
    let version = |e: &Endpoints| {
        e.resource_version()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match (cached, written) {
        (Some(c), Some(w)) if version(w) > version(c) => Some(w),
        (None, Some(w)) => Some(w),
        (cached, _) => cached,
    }
}

/// Brings every selecting Service's Endpoints in line; one that cannot be
/// written does not hold the others back (the first error is returned
/// after all were tried).
async fn reconcile(
    client: &Client,
    services: &Informer<Service>,
    pods: &Informer<Pod>,
    endpoints: &Informer<Endpoints>,
    written: &mut BTreeMap<(String, String), Endpoints>,
) -> Result<(), EndpointsError> {
    let pods = pods.store.state();
    let existing: BTreeMap<(String, String), std::sync::Arc<Endpoints>> = endpoints
        .store
        .state()
        .into_iter()
        .map(|e| ((e.namespace().unwrap_or_default(), e.name_any()), e))
        .collect();
    let mut wanted = BTreeMap::new();
    let mut first_error = None;
    for service in services.store.state() {
        let has_selector = service
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .is_some_and(|s| !s.is_empty());
        if !has_selector {
            continue;
        }
        let key = (service.namespace().unwrap_or_default(), service.name_any());
        let current = newest(existing.get(&key).map(|e| e.as_ref()), written.get(&key));
        match write(client, &service, current, subsets(&service, &pods)).await {
            Ok(Some(object)) => {
                written.insert(key.clone(), object);
            }
            Ok(None) => {}
            Err(error) => {
                written.remove(&key);
                first_error.get_or_insert(error);
            }
        }
        wanted.insert(key, ());
    }
    written.retain(|key, _| wanted.contains_key(key));
    for (key, endpoints) in existing {
        let managed = endpoints
            .labels()
            .get(MANAGED_BY)
            .is_some_and(|v| v == CONTROLLER);
        if managed && !wanted.contains_key(&key) {
            let api: Api<Endpoints> = Api::namespaced(client.clone(), &key.0);
            match api.delete(&key.1, &DeleteParams::default()).await {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(source) => {
                    first_error.get_or_insert(EndpointsError::Write {
                        namespace: key.0,
                        name: key.1,
                        source,
                    });
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Runs the controller until the task is dropped.
pub async fn run(client: Client) {
    let services = Informer::start(Api::<Service>::all(client.clone()));
    let pods = Informer::start(Api::<Pod>::all(client.clone()));
    let endpoints = Informer::start(Api::<Endpoints>::all(client.clone()));
    let mut changes = [
        services.changes.clone(),
        pods.changes.clone(),
        endpoints.changes.clone(),
    ];
    for store in [
        services.store.wait_until_ready().await.is_ok(),
        pods.store.wait_until_ready().await.is_ok(),
        endpoints.store.wait_until_ready().await.is_ok(),
    ] {
        if !store {
            return;
        }
    }
    let mut written = BTreeMap::new();
    loop {
        if let Err(error) = reconcile(&client, &services, &pods, &endpoints, &mut written).await {
            tracing::warn!(%error, "cannot reconcile endpoints; retrying");
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let [a, b, c] = &mut changes;
        tokio::select! {
            _ = a.changed() => {}
            _ = b.changed() => {}
            _ = c.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pod(name: &str, ip: &str, ready: bool, labels: Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "shop", "uid": name, "labels": labels},
                "spec": {"nodeName": "sandbox", "containers": [{"name": "pg", "ports": [{"name": "postgres", "containerPort": 5432}]}]},
                "status": {"podIP": ip, "phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
            }))
            .expect("pod"),
        )
    }

    #[test]
    fn readiness_decides_which_addresses_take_traffic() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "db-rw", "namespace": "shop"},
            "spec": {"selector": {"role": "primary"}, "ports": [{"name": "pg", "port": 5432, "targetPort": "postgres"}]}
        }))
        .expect("service");
        let pods = vec![
            pod("b", "127.1.0.3", true, json!({"role": "primary"})),
            pod("a", "127.1.0.2", false, json!({"role": "primary"})),
            pod("c", "127.1.0.4", true, json!({"role": "replica"})),
        ];
        let subsets = subsets(&service, &pods);
        assert_eq!(subsets.len(), 1);
        let subset = &subsets[0];
        assert_eq!(
            subset["ports"],
            json!([{"name": "pg", "port": 5432, "protocol": "TCP"}])
        );
        assert_eq!(subset["addresses"].as_array().map(Vec::len), Some(1));
        assert_eq!(subset["addresses"][0]["ip"], "127.1.0.3");
        assert_eq!(subset["notReadyAddresses"][0]["ip"], "127.1.0.2");
        assert_eq!(subset["addresses"][0]["targetRef"]["name"], "b");
    }

    #[test]
    fn a_service_publishing_unready_addresses_routes_to_every_selected_pod() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "db-rw", "namespace": "shop"},
            "spec": {"selector": {"role": "primary"}, "publishNotReadyAddresses": true,
                     "ports": [{"name": "pg", "port": 5432, "targetPort": "postgres"}]}
        }))
        .expect("service");
        let mut terminating = (*pod("d", "127.1.0.5", true, json!({"role": "primary"}))).clone();
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-12-06T10:00:00Z".parse().expect("a time"),
            ));
        let mut finished = (*pod("e", "127.1.0.6", false, json!({"role": "primary"}))).clone();
        if let Some(status) = finished.status.as_mut() {
            status.phase = Some("Succeeded".into());
        }
        let pods = vec![
            pod("a", "127.1.0.2", false, json!({"role": "primary"})),
            pod("c", "127.1.0.4", true, json!({"role": "replica"})),
            Arc::new(terminating),
            Arc::new(finished),
        ];
        let subsets = subsets(&service, &pods);
        assert_eq!(subsets.len(), 1);
        let ips: Vec<&str> = subsets[0]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["ip"].as_str())
            .collect();
        // Unready and terminating pods take traffic; a finished one and
        // one the selector leaves out do not.
        assert_eq!(ips, ["127.1.0.2", "127.1.0.5"]);
        assert!(subsets[0].get("notReadyAddresses").is_none());
    }

    #[test]
    fn a_write_newer_than_the_cache_is_written_against() {
        let at = |version: &str| -> Endpoints {
            serde_json::from_value(
                json!({"metadata": {"name": "db-rw", "resourceVersion": version}}),
            )
            .expect("endpoints")
        };
        let (old, new) = (at("41"), at("57"));
        let version = |e: Option<&Endpoints>| e.and_then(|e| e.resource_version());
        assert_eq!(
            version(newest(Some(&old), Some(&new))).as_deref(),
            Some("57")
        );
        // The cache caught up (or someone else wrote since): the cache.
        assert_eq!(
            version(newest(Some(&new), Some(&old))).as_deref(),
            Some("57")
        );
        assert_eq!(version(newest(Some(&old), None)).as_deref(), Some("41"));
        assert_eq!(version(newest(None, Some(&new))).as_deref(), Some("57"));
        assert!(newest(None, None).is_none());
    }
}
