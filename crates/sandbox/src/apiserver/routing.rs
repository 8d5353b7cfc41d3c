//! Maps request paths to what they address, the way the Kubernetes API lays
//! out its URLs.

/// A request for objects of one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// For a `proxy` subresource, the path after it as kube-apiserver's
    /// `getRequestOptions` hands it to the proxy (`PodProxyOptions.path`):
    /// empty, or led by `/`, with the request's trailing slash kept.
    pub proxy_path: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Version,
    Health,
    CoreVersions,
    CoreResources,
    Groups,
    Group(String),
    GroupResources(String, String),
    OpenApiV2,
    OpenApiV3,
    OpenApiV3GroupVersion(String, String),
    Resource(ResourcePath),
    /// `/sandbox/faults/{fault}`: the sandbox's fault injection, for
    /// `tusk sandbox fault` (see `fault_control`).
    SandboxFault(String),
    Unknown,
}

pub fn parse(path: &str) -> Route {
    let trailing_slash = path.len() > 1 && path.ends_with('/');
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segments.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", "v1"] => Route::CoreResources,
        ["api", version, rest @ ..] => resource("", version, rest, trailing_slash),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["apis", group, version] => {
            Route::GroupResources((*group).to_owned(), (*version).to_owned())
        }
        ["apis", group, version, rest @ ..] => resource(group, version, rest, trailing_slash),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3,
        ["openapi", "v3", "api", version] => {
            Route::OpenApiV3GroupVersion(String::new(), (*version).to_owned())
        }
        ["openapi", "v3", "apis", group, version] => {
            Route::OpenApiV3GroupVersion((*group).to_owned(), (*version).to_owned())
        }
        ["sandbox", "faults", fault] => Route::SandboxFault((*fault).to_owned()),
        _ => Route::Unknown,
    }
}

/// Splits `{name}/proxy/{path...}` into the segments up to `proxy` and
/// the path after it, as kube-apiserver's RequestInfo keeps the name and
/// the subresource whatever follows them.
fn split_proxy_path<'a>(
    rest: &'a [&'a str],
    trailing_slash: bool,
) -> (&'a [&'a str], Option<String>) {
    let name_at = if rest.len() > 2 && rest[0] == "namespaces" {
        3
    } else {
        1
    };
    if rest.get(name_at + 1) != Some(&"proxy") {
        return (rest, None);
    }
    let (head, tail) = rest.split_at(name_at + 2);
    let mut path = tail.join("/");
    if !path.is_empty() {
        path.insert(0, '/');
    }
    if trailing_slash && !path.ends_with('/') {
        path.push('/');
    }
    (head, Some(path))
}

fn resource(group: &str, version: &str, rest: &[&str], trailing_slash: bool) -> Route {
    let owned = |s: Option<&&str>| s.map(|s| (*s).to_owned());
    let (rest, proxy_path) = split_proxy_path(rest, trailing_slash);
    let path = match rest {
        // /namespaces/{name}/status and /finalize address the Namespace.
        ["namespaces", name, sub @ ("status" | "finalize")] => ResourcePath {
            plural: "namespaces".into(),
            namespace: None,
            name: Some((*name).to_owned()),
            subresource: Some((*sub).to_owned()),
            group: group.into(),
            version: version.into(),
            proxy_path: None,
        },
        ["namespaces", namespace, plural, tail @ ..] if tail.len() <= 2 => ResourcePath {
            group: group.into(),
            version: version.into(),
            plural: (*plural).to_owned(),
            namespace: Some((*namespace).to_owned()),
            name: owned(tail.first()),
            subresource: owned(tail.get(1)),
            proxy_path: None,
        },
        [plural, tail @ ..] if tail.len() <= 2 => ResourcePath {
            group: group.into(),
            version: version.into(),
            plural: (*plural).to_owned(),
            namespace: None,
            name: owned(tail.first()),
            subresource: owned(tail.get(1)),
            proxy_path: None,
        },
        _ => return Route::Unknown,
    };
    Route::Resource(ResourcePath { proxy_path, ..path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_and_cluster_paths_are_told_apart() {
        let Route::Resource(p) = parse("/api/v1/namespaces/default/pods/web/status") else {
            panic!("not a resource route");
        };
        assert_eq!(
            (
                p.plural.as_str(),
                p.namespace.as_deref(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            ("pods", Some("default"), Some("web"), Some("status"))
        );
        let Route::Resource(p) = parse("/api/v1/namespaces/default") else {
            panic!("not a resource route");
        };
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref()),
            ("namespaces", Some("default"))
        );
        let Route::Resource(p) = parse("/apis/postgres.tusk.dev/v1alpha1/postgresclusters") else {
            panic!("not a resource route");
        };
        assert_eq!(
            (p.group.as_str(), p.namespace, p.name),
            ("postgres.tusk.dev", None, None)
        );
        assert_eq!(parse("/apis/a/b/c/d/e/f/g"), Route::Unknown);
    }

    fn proxied(path: &str) -> (String, String, String) {
        let Route::Resource(p) = parse(path) else {
            panic!("{path} is not a resource route");
        };
        assert_eq!(p.subresource.as_deref(), Some("proxy"), "{path}");
        (
            p.plural,
            p.name.unwrap_or_default(),
            p.proxy_path
                .unwrap_or_else(|| panic!("{path} keeps no proxy path")),
        )
    }

    #[test]
    fn a_pod_proxy_keeps_its_name_port_and_path() {
        let pods = "/api/v1/namespaces/default/pods";
        let cases = [
            ("web:8080/proxy/status", "web:8080", "/status"),
            ("web/proxy/metrics/raw", "web", "/metrics/raw"),
            ("http:web:8080/proxy/a/b/", "http:web:8080", "/a/b/"),
            ("https:web:8443/proxy/", "https:web:8443", "/"),
            ("web:http/proxy", "web:http", ""),
            ("web/proxy/a//b/../c", "web", "/a/b/../c"),
        ];
        for (rest, name, path) in cases {
            let (plural, got_name, got_path) = proxied(&format!("{pods}/{rest}"));
            assert_eq!(
                (plural.as_str(), got_name.as_str(), got_path.as_str()),
                ("pods", name, path),
                "{rest}"
            );
        }
        assert_eq!(
            proxied("/api/v1/nodes/n1/proxy/metrics"),
            ("nodes".into(), "n1".into(), "/metrics".into())
        );
    }

    #[test]
    fn only_a_proxy_takes_a_path_after_its_subresource() {
        let Route::Resource(p) = parse("/api/v1/namespaces/default/pods/web/status") else {
            panic!("not a resource route");
        };
        assert_eq!(p.proxy_path, None);
        assert_eq!(
            parse("/api/v1/namespaces/default/pods/web/status/extra"),
            Route::Unknown
        );
        assert_eq!(
            parse("/api/v1/namespaces/default/pods/web/log/extra"),
            Route::Unknown
        );
    }
}
