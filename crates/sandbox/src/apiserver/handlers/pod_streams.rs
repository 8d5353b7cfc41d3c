//! `pods/log` and `pods/exec`: the API server checks the pod and the
//! container (kube's messages), finds the kubelet of the pod's node and
//! proxies the request to it ([`kubelet_proxy`]).
//!
//! Both arrive as ordinary resource requests (resource `pods`, subresource
//! `log` or `exec`, the pod's name and namespace), so authorization sees
//! the attributes kube-apiserver gives them: `get` on `pods/log`; `create`
//! on `pods/exec` for a POST, and for the GET that opens a WebSocket
//! (kubectl 1.30 and later) `get` and also `create`, as kube-apiserver's
//! `AuthorizePodWebsocketUpgradeCreatePermission` gate asks (see
//! `auth::authorize_request`).
//!
//! SPDY is not served: kubectl 1.32 opens exec over WebSocket
//! (`v5.channel.k8s.io`) and falls back to SPDY only when the upgrade is
//! refused.

use std::sync::Arc;

use axum::http::Method;
use axum::response::Response;
use serde_json::Value;

use crate::apiserver::error::ApiError;
use crate::apiserver::handlers::request::{ResourceRequest, key_of};
use crate::apiserver::kubelet_proxy::{self, Kubelet};
use crate::apiserver::resources::Resource;
use crate::apiserver::routing::{ResourcePath, Route};
use crate::apiserver::state::Api;
use crate::apiserver::storage::ObjectKey;

/// Whether `route` addresses a pod's log or exec, whose answers are not
/// JSON (text, a WebSocket) whatever the client accepts.
pub fn is_stream_route(route: &Route) -> bool {
    matches!(route, Route::Resource(path)
        if path.plural == "pods" && path.group.is_empty()
            && matches!(path.subresource.as_deref(), Some("log" | "exec")))
}

/// Whether `path` addresses a streaming subresource of a pod.
pub fn is_pod_stream(resource: &Resource, path: &ResourcePath) -> bool {
    resource.kind == "Pod" && matches!(path.subresource.as_deref(), Some("log" | "exec"))
}

fn names(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// The container a request addresses: the one named, or the pod's only
/// container; kube's 400 otherwise.
pub fn container_of(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let spec = &pod["spec"];
    let main = names(spec.get("containers"));
    let init = names(spec.get("initContainers"));
    let ephemeral = names(spec.get("ephemeralContainers"));
    match asked {
        Some(asked)
            if main
                .iter()
                .chain(&init)
                .chain(&ephemeral)
                .any(|c| c == asked) =>
        {
            Ok(asked.to_owned())
        }
        Some(asked) => Err(ApiError::bad_request(format!(
            "container {asked} is not valid for pod {name}"
        ))),
        None if main.len() == 1 => Ok(main[0].clone()),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                main.join(" ")
            );
            if !init.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            if !ephemeral.is_empty() {
                message.push_str(&format!(
                    " or one of the ephemeral containers: [{}]",
                    ephemeral.join(" ")
                ));
            }
            Err(ApiError::bad_request(message))
        }
    }
}

/// The kubelet of the node the pod is bound to.
fn kubelet_of(api: &Api, pod: &Value, name: &str) -> Result<Kubelet, ApiError> {
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node_name.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let nodes = api
        .registry
        .lookup("", "v1", "nodes")
        .ok_or(ApiError::NoResource)?;
    let node = api
        .store
        .get(&ObjectKey::new(&nodes.key, "", node_name))?
        .ok_or_else(|| ApiError::not_found("nodes", node_name))?;
    Kubelet::of_node(&node).ok_or_else(|| {
        ApiError::internal(format!("node {node_name} announces no kubelet endpoint"))
    })
}

pub async fn serve(
    api: &Arc<Api>,
    resource: &Resource,
    path: &ResourcePath,
    mut request: ResourceRequest,
) -> Result<Response, ApiError> {
    let (Some(name), Some(namespace)) = (path.name.as_deref(), path.namespace.as_deref()) else {
        return Err(ApiError::NoResource);
    };
    let exec = path.subresource.as_deref() == Some("exec");
    let allowed = request.method == Method::GET || (exec && request.method == Method::POST);
    if !allowed {
        return Err(ApiError::MethodNotAllowed {
            message: "the server does not allow this method on the requested resource".into(),
        });
    }
    let pod = api
        .store
        .get(&key_of(resource, path))?
        .ok_or_else(|| ApiError::not_found(&resource.qualified_plural(), name))?;
    let container = container_of(&pod, name, request.param("container"))?;
    let kubelet = kubelet_of(api, &pod, name)?;
    let endpoint = if exec { "exec" } else { "containerLogs" };
    let mut target = format!("/{endpoint}/{namespace}/{name}/{container}");
    if !request.raw_query.is_empty() {
        target.push('?');
        target.push_str(&request.raw_query);
    }
    let upgrade = request.upgrade.take();
    kubelet_proxy::forward(
        &kubelet,
        &api.token,
        request.method.clone(),
        &target,
        &request.headers,
        upgrade,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_is_named_or_the_only_one() {
        let single = json!({"spec": {"containers": [{"name": "main"}]}});
        assert_eq!(
            container_of(&single, "web", None).expect("only one"),
            "main"
        );
        let pair = json!({"spec": {
            "initContainers": [{"name": "setup"}],
            "containers": [{"name": "a"}, {"name": "b"}],
        }});
        assert_eq!(
            container_of(&pair, "web", Some("setup")).expect("init"),
            "setup"
        );
        let missing = container_of(&pair, "web", None).expect_err("no name");
        assert_eq!(
            missing.status()["message"],
            "a container name must be specified for pod web, choose one of: [a b] or one of the init containers: [setup]"
        );
        let wrong = container_of(&pair, "web", Some("c")).expect_err("no such container");
        assert_eq!(wrong.code(), 400);
        assert_eq!(
            wrong.status()["message"],
            "container c is not valid for pod web"
        );
    }
}
