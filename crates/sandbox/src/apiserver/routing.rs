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
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["apis", group, version] => {
            Route::GroupResources((*group).to_owned(), (*version).to_owned())
        }
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
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

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let owned = |s: Option<&&str>| s.map(|s| (*s).to_owned());
    let path = match rest {
        // /namespaces/{name}/status and /finalize address the Namespace.
        ["namespaces", name, sub @ ("status" | "finalize")] => ResourcePath {
            plural: "namespaces".into(),
            namespace: None,
            name: Some((*name).to_owned()),
            subresource: Some((*sub).to_owned()),
            group: group.into(),
            version: version.into(),
        },
        ["namespaces", namespace, plural, tail @ ..] if tail.len() <= 2 => ResourcePath {
            group: group.into(),
            version: version.into(),
            plural: (*plural).to_owned(),
            namespace: Some((*namespace).to_owned()),
            name: owned(tail.first()),
            subresource: owned(tail.get(1)),
        },
        [plural, tail @ ..] if tail.len() <= 2 => ResourcePath {
            group: group.into(),
            version: version.into(),
            plural: (*plural).to_owned(),
            namespace: None,
            name: owned(tail.first()),
            subresource: owned(tail.get(1)),
        },
        _ => return Route::Unknown,
    };
    Route::Resource(path)
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
}
