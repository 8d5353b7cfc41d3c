//! Which webhooks of a configuration a request goes to, as kube-apiserver
//! decides it: the `rules` (operations, API groups, versions, resources
//! with their subresources, scope), the `namespaceSelector` (against the
//! labels of the object's namespace; of the object itself for a
//! Namespace) and the `objectSelector` (against the new or the old
//! object's labels). `matchConditions` (CEL) are not evaluated here: a
//! webhook that declares them is refused at the call, never skipped.

use serde_json::Value;

use crate::apiserver::selectors::LabelSelector;

/// What a request is, for matching.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub plural: &'a str,
    pub subresource: Option<&'a str>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: &'a str,
    pub namespaced: bool,
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn listed(list: &[&str], item: &str) -> bool {
    list.iter().any(|entry| *entry == "*" || *entry == item)
}

/// Whether `pattern` (`pods`, `pods/status`, `*`, `*/status`, `pods/*`,
/// `*/*`) names the target's resource and subresource.
fn resource_matches(pattern: &str, plural: &str, subresource: Option<&str>) -> bool {
    let (resource, sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    let resource_ok = resource == "*" || resource == plural;
    match subresource {
        None => resource_ok && sub.is_empty(),
        Some(wanted) => resource_ok && (sub == "*" || sub == wanted),
    }
}

/// Whether one of the webhook's `rules` covers `target`.
pub fn rules_match(webhook: &Value, target: &Target<'_>) -> bool {
    let Some(rules) = webhook.get("rules").and_then(Value::as_array) else {
        return false;
    };
    rules.iter().any(|rule| {
        let scope = rule.get("scope").and_then(Value::as_str).unwrap_or("*");
        let scope_ok = match scope {
            "Cluster" => !target.namespaced,
            "Namespaced" => target.namespaced,
            _ => true,
        };
        scope_ok
            && listed(&strings(rule.get("operations")), target.operation)
            && listed(&strings(rule.get("apiGroups")), target.group)
            && listed(&strings(rule.get("apiVersions")), target.version)
            && strings(rule.get("resources"))
                .iter()
                .any(|pattern| resource_matches(pattern, target.plural, target.subresource))
    })
}

/// Whether `selector` (a LabelSelector as JSON; absent or empty selects
/// everything) selects an object with `labels_of`.
fn selects(selector: Option<&Value>, labelled: &Value) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return true;
    };
    LabelSelector::from_object(selector).is_some_and(|s| s.matches(labelled))
}

/// The `namespaceSelector` against `namespace` (the object's namespace as
/// stored; `None` for a cluster-scoped object, which it always admits).
pub fn namespace_matches(webhook: &Value, namespace: Option<&Value>) -> bool {
    match namespace {
        None => true,
        Some(namespace) => selects(webhook.get("namespaceSelector"), namespace),
    }
}

/// The `objectSelector` against the new or the old object.
pub fn object_matches(webhook: &Value, object: Option<&Value>, old: Option<&Value>) -> bool {
    let selector = webhook.get("objectSelector");
    let empty = Value::Null;
    [object, old]
        .into_iter()
        .flatten()
        .any(|candidate| selects(selector, candidate))
        || (object.is_none() && old.is_none() && selects(selector, &empty))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target<'a>(operation: &'a str, subresource: Option<&'a str>) -> Target<'a> {
        Target {
            group: "postgres.tusk.dev",
            version: "v1alpha1",
            plural: "postgresclusters",
            subresource,
            operation,
            namespaced: true,
        }
    }

    fn webhook() -> Value {
        json!({
            "rules": [{
                "apiGroups": ["postgres.tusk.dev"], "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["postgresclusters"],
                "scope": "Namespaced"
            }],
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["tusk-system"]}
            ]},
            "objectSelector": {"matchLabels": {"checked": "yes"}}
        })
    }

    #[test]
    fn rules_match_operations_resources_and_subresources() {
        let webhook = webhook();
        assert!(rules_match(&webhook, &target("CREATE", None)));
        assert!(!rules_match(&webhook, &target("DELETE", None)));
        assert!(!rules_match(&webhook, &target("UPDATE", Some("status"))));
        let any = json!({"rules": [{"apiGroups": ["*"], "apiVersions": ["*"],
            "operations": ["*"], "resources": ["*/*"]}]});
        assert!(rules_match(&any, &target("UPDATE", Some("status"))));
        let cluster_only = json!({"rules": [{"apiGroups": ["*"], "apiVersions": ["*"],
            "operations": ["*"], "resources": ["*"], "scope": "Cluster"}]});
        assert!(!rules_match(&cluster_only, &target("CREATE", None)));
    }

    #[test]
    fn selectors_read_the_namespace_and_either_object() {
        let webhook = webhook();
        let namespace =
            |name: &str| json!({"metadata": {"labels": {"kubernetes.io/metadata.name": name}}});
        assert!(namespace_matches(&webhook, Some(&namespace("shop"))));
        assert!(!namespace_matches(
            &webhook,
            Some(&namespace("tusk-system"))
        ));
        assert!(namespace_matches(&webhook, None));
        let labelled = json!({"metadata": {"labels": {"checked": "yes"}}});
        let bare = json!({"metadata": {}});
        assert!(object_matches(&webhook, Some(&bare), Some(&labelled)));
        assert!(!object_matches(&webhook, Some(&bare), None));
        assert!(object_matches(
            &json!({"objectSelector": {}}),
            Some(&bare),
            None
        ));
    }
}
