//! API discovery: `/version`, `/api`, `/apis` and the resource lists that
//! clients read to map kinds to URLs. Custom kinds appear here as soon as
//! their CRD exists.

use std::cmp::Ordering;

use serde_json::{Value, json};

use crate::apiserver::auth::reviews::REVIEWS;
use crate::apiserver::resources::{Registry, Resource};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0+tusk-sandbox",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": "linux/amd64"
    })
}

pub fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]
    })
}

/// Kubernetes' version priority: GA before beta before alpha, higher
/// numbers first.
pub fn version_priority(a: &str, b: &str) -> Ordering {
    fn rank(v: &str) -> (u8, u64, u64) {
        let Some(rest) = v.strip_prefix('v') else {
            return (0, 0, 0);
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major = digits.parse().unwrap_or(0);
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            (3, major, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (2, major, n.parse().unwrap_or(0))
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (1, major, n.parse().unwrap_or(0))
        } else {
            (0, 0, 0)
        }
    }
    rank(b).cmp(&rank(a)).then_with(|| a.cmp(b))
}

fn served_versions(resource: &Resource) -> Vec<String> {
    let mut versions: Vec<String> = resource
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    versions.sort_by(|a, b| version_priority(a, b));
    versions
}

fn group_document(group: &str, resources: &[Resource]) -> Option<Value> {
    let mut versions: Vec<String> = resources
        .iter()
        .filter(|r| r.group == group)
        .flat_map(served_versions)
        .collect();
    if REVIEWS.iter().any(|(g, ..)| *g == group) {
        versions.push("v1".to_owned());
    }
    versions.sort_by(|a, b| version_priority(a, b));
    versions.dedup();
    let preferred = versions.first()?.clone();
    let entry = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(json!({
        "name": group,
        "versions": versions.iter().map(entry).collect::<Vec<_>>(),
        "preferredVersion": entry(&preferred),
    }))
}

pub fn groups(registry: &Registry) -> Value {
    let resources = registry.all();
    let mut names: Vec<String> = resources
        .iter()
        .map(|r| r.group.clone())
        .filter(|g| !g.is_empty())
        .chain(REVIEWS.iter().map(|(g, ..)| (*g).to_owned()))
        .collect();
    names.sort();
    names.dedup();
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": names.iter().filter_map(|g| group_document(g, &resources)).collect::<Vec<_>>(),
    })
}

pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let mut document = group_document(name, &registry.all())?;
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Some(document)
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `APIResourceList` for one group version; `None` when nothing is served
/// there.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut list = Vec::new();
    for resource in registry.all() {
        if resource.group != group {
            continue;
        }
        let Some(served) = resource.version(version) else {
            continue;
        };
        let mut entry = json!({
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": VERBS,
        });
        if !resource.short_names.is_empty() {
            entry["shortNames"] = json!(resource.short_names);
        }
        let mut categories = resource.categories.clone();
        if resource.custom && !categories.contains(&"all".to_owned()) && categories.is_empty() {
            categories = Vec::new();
        }
        if !categories.is_empty() {
            entry["categories"] = json!(categories);
        }
        list.push(entry);
        if resource.key == "/serviceaccounts" {
            list.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
        if served.status_subresource {
            list.push(json!({
                "name": format!("{}/status", resource.plural),
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if served.scale.is_some() {
            list.push(json!({
                "name": format!("{}/scale", resource.plural),
                "singularName": "",
                "namespaced": resource.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if version == "v1" {
        list.extend(review_resources(group));
    }
    if list.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": list,
    }))
}

/// The review kinds of `group` (create only, never stored).
fn review_resources(group: &str) -> Vec<Value> {
    REVIEWS
        .iter()
        .filter(|(g, ..)| *g == group)
        .map(|(_, plural, kind, namespaced)| {
            json!({
                "name": plural,
                "singularName": kind.to_lowercase(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": ["create"],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_ga_then_beta_then_alpha() {
        let mut versions = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2"];
        versions.sort_by(|a, b| version_priority(a, b));
        assert_eq!(versions, vec!["v2", "v1", "v2beta1", "v1beta2", "v1alpha1"]);
    }
}
