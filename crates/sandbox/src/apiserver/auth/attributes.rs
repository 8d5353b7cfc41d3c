//! A request's authorization attributes, as kube-apiserver's RequestInfo
//! derives them: the verb (`get list watch create update patch delete
//! deletecollection`, or the lowercase HTTP method for a non-resource
//! URL), the API group, resource, subresource, name and namespace.
//!
//! A list or watch whose field selector fixes `metadata.name` is about
//! that name (so `resourceNames` can allow watching one object), and a
//! request for a namespace is in that namespace, as in Kubernetes.

use std::collections::HashMap;

use axum::http::Method;

use crate::apiserver::auth::rules::{ResourceTarget, Target};
use crate::apiserver::routing::{ResourcePath, Route};

/// What a request asks to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub target: Target,
}

impl Attributes {
    /// The attributes of a request for `path` (as routed to `route`).
    pub fn of_request(
        method: &Method,
        path: &str,
        route: &Route,
        query: &HashMap<String, String>,
    ) -> Self {
        match route {
            Route::Resource(resource) => resource_attributes(method, resource, query),
            _ => Self {
                verb: method.as_str().to_ascii_lowercase(),
                target: Target::Path(path.to_owned()),
            },
        }
    }

    pub fn resource(&self) -> Option<&ResourceTarget> {
        match &self.target {
            Target::Resource(r) => Some(r),
            Target::Path(_) => None,
        }
    }
}

fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    matches!(
        query.get(name).map(String::as_str),
        Some("true" | "1" | "t" | "T" | "TRUE" | "True")
    )
}

/// `metadata.name` when a field selector requires exactly that name.
fn selected_name(query: &HashMap<String, String>) -> Option<String> {
    let selector = query.get("fieldSelector")?;
    selector.split(',').find_map(|term| {
        let term = term.trim();
        let value = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        (!value.is_empty() && !value.contains('/')).then(|| value.to_owned())
    })
}

fn resource_attributes(
    method: &Method,
    path: &ResourcePath,
    query: &HashMap<String, String>,
) -> Attributes {
    let mut name = path.name.clone().unwrap_or_default();
    let mut verb = match method.as_str() {
        "GET" | "HEAD" => "get".to_owned(),
        "POST" => "create".to_owned(),
        "PUT" => "update".to_owned(),
        "PATCH" => "patch".to_owned(),
        "DELETE" => "delete".to_owned(),
        other => other.to_ascii_lowercase(),
    };
    if name.is_empty() && verb == "get" {
        verb = if flag(query, "watch") {
            "watch"
        } else {
            "list"
        }
        .to_owned();
        if let Some(selected) = selected_name(query) {
            name = selected;
        }
    }
    if name.is_empty() && verb == "delete" {
        verb = "deletecollection".to_owned();
    }
    let namespace = match (&path.namespace, path.plural.as_str()) {
        (Some(namespace), _) => namespace.clone(),
        (None, "namespaces") => name.clone(),
        (None, _) => String::new(),
    };
    Attributes {
        verb,
        target: Target::Resource(ResourceTarget {
            group: path.group.clone(),
            resource: path.plural.clone(),
            subresource: path.subresource.clone().unwrap_or_default(),
            name,
            namespace,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::routing;

    fn attributes(method: Method, uri: &str) -> (String, Target) {
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        let query: HashMap<String, String> = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.replace("%3D", "=")))
            .collect();
        let a = Attributes::of_request(&method, path, &routing::parse(path), &query);
        (a.verb, a.target)
    }

    fn resource(group: &str, resource: &str, sub: &str, name: &str, ns: &str) -> Target {
        Target::Resource(ResourceTarget {
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: ns.into(),
        })
    }

    #[test]
    fn requests_map_to_kube_apiserver_attributes() {
        let pods = |name: &str| resource("", "pods", "", name, "db");
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/db/pods/web",
                "get",
                pods("web"),
            ),
            (Method::GET, "/api/v1/namespaces/db/pods", "list", pods("")),
            (
                Method::GET,
                "/api/v1/namespaces/db/pods?watch=true",
                "watch",
                pods(""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/db/pods?watch=1&fieldSelector=metadata.name%3Dweb",
                "watch",
                pods("web"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/db/pods",
                "create",
                pods(""),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/db/pods/web",
                "update",
                pods("web"),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/db/pods/web",
                "patch",
                pods("web"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/db/pods/web",
                "delete",
                pods("web"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/db/pods",
                "deletecollection",
                pods(""),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/db/pods/web/status",
                "update",
                resource("", "pods", "status", "web", "db"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/db/pods/https:web:8443/proxy/metrics/?x=1",
                "get",
                resource("", "pods", "proxy", "https:web:8443", "db"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/db/pods/web/proxy",
                "create",
                resource("", "pods", "proxy", "web", "db"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/db",
                "get",
                resource("", "namespaces", "", "db", "db"),
            ),
            (
                Method::GET,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "list",
                resource("rbac.authorization.k8s.io", "clusterroles", "", "", ""),
            ),
            (
                Method::GET,
                "/apis/apps/v1",
                "get",
                Target::Path("/apis/apps/v1".into()),
            ),
            (
                Method::POST,
                "/version",
                "post",
                Target::Path("/version".into()),
            ),
        ];
        for (method, uri, verb, target) in cases {
            assert_eq!(attributes(method, uri), (verb.to_owned(), target), "{uri}");
        }
    }
}
