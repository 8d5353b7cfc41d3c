//! Fault injection over HTTP, for `tusk sandbox fault` and any client with
//! the sandbox's credentials: `POST /sandbox/faults/{fault}?...`, a path
//! authorized like any other non-resource URL (the admin may; RBAC's
//! `nonResourceURLs` decides for others).
//!
//! The API server applies its own faults (a pod or node cut off from it:
//! [`crate::apiserver::partitions`]) and relays the node's (Service and peer
//! cuts, freezing, killing, node loss) to the kubelet of the pod's node, as it
//! relays `pods/log`, since the kubelet may run in another process.
//!
//! | fault | parameters |
//! |---|---|
//! | `cut-api`, `heal-api` | `namespace`, `pod` |
//! | `cut-service`, `heal-service` | `namespace`, `pod`, `direction` (`ingress`, `egress`, `both`) |
//! | `cut-peers`, `heal-peers` | `namespace`, `pod`, `direction` (Docker runtime only) |
//! | `freeze`, `thaw`, `kill` | `namespace`, `pod`, `container` (default: the pod's first) |
//! | `lose-node` | `node`, `processes` (`keep`, `freeze`, `kill`) |
//! | `restore-node` | `node` |
//!
//! A lost node is also cut off from the API server (its pods' requests go
//! unanswered), since whatever took the node away took its network too.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::apiserver::error::ApiError;
use crate::apiserver::kubelet_proxy::{self, Kubelet};
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;
use crate::fault_client::escape;

fn param<'a>(query: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    query
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("the fault needs the parameter {name:?}")))
}

fn done(message: String) -> Result<Response, ApiError> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Success", "message": message});
    let content_type = [(header::CONTENT_TYPE, "application/json")];
    Ok((StatusCode::OK, content_type, body.to_string()).into_response())
}

/// Serves `POST /sandbox/faults/{fault}`.
pub async fn serve(
    api: &Api,
    method: &Method,
    fault: &str,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    if method != Method::POST {
        return Err(ApiError::MethodNotAllowed {
            message: "faults are injected with POST".into(),
        });
    }
    let partitions = api.faults.partitions();
    match fault {
        "cut-api" | "heal-api" => {
            let (namespace, pod) = (param(query, "namespace")?, param(query, "pod")?);
            pod_object(api, namespace, pod)?;
            if fault == "cut-api" {
                partitions.cut_pod(namespace, pod);
            } else {
                partitions.heal_pod(namespace, pod);
            }
            done(format!("{fault}: pod {namespace}/{pod}"))
        }
        "cut-service" | "heal-service" | "cut-peers" | "heal-peers" | "freeze" | "thaw"
        | "kill" => pod_fault(api, fault, query).await,
        "lose-node" | "restore-node" => {
            let node = param(query, "node")?;
            if fault == "lose-node" {
                partitions.cut_node(node);
            }
            let relayed = relay(api, node, fault, query).await;
            if fault == "restore-node" || relayed.is_err() {
                partitions.heal_node(node);
            }
            relayed
        }
        other => Err(ApiError::bad_request(format!(
            "unknown fault {other:?}: one of cut-api, heal-api, cut-service, heal-service, \
             cut-peers, heal-peers, freeze, thaw, kill, lose-node, restore-node"
        ))),
    }
}

fn pod_object(api: &Api, namespace: &str, pod: &str) -> Result<Arc<Value>, ApiError> {
    api.store
        .get(&ObjectKey::new("/pods", namespace, pod))?
        .ok_or_else(|| ApiError::not_found("pods", pod))
}

/// A fault of one pod, relayed to its node's kubelet.
async fn pod_fault(
    api: &Api,
    fault: &str,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let (namespace, name) = (param(query, "namespace")?, param(query, "pod")?);
    let pod = pod_object(api, namespace, name)?;
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let mut query = query.clone();
    if !query.contains_key("container") {
        let first = pod["spec"]["containers"][0]["name"]
            .as_str()
            .unwrap_or_default();
        query.insert("container".into(), first.to_owned());
    }
    relay(api, node, fault, &query).await
}

async fn relay(
    api: &Api,
    node: &str,
    fault: &str,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let object = api
        .store
        .get(&ObjectKey::new("/nodes", "", node))?
        .ok_or_else(|| ApiError::not_found("nodes", node))?;
    let kubelet = Kubelet::of_node(&object).ok_or_else(|| {
        ApiError::bad_request(format!("node {node} announces no kubelet endpoint"))
    })?;
    let encoded: Vec<String> = query
        .iter()
        .map(|(key, value)| format!("{}={}", escape(key), escape(value)))
        .collect();
    let path = format!("/faults/{fault}?{}", encoded.join("&"));
    let headers = HeaderMap::new();
    kubelet_proxy::forward(&kubelet, &api.token, Method::POST, &path, &headers, None).await
}
