//! Deployments and ReplicaSets (`apps/v1`): the defaults
//! `pkg/apis/apps/v1/defaults.go` sets and the checks
//! `pkg/apis/apps/validation` makes that a controller relies on (a
//! selector that selects the template, a strategy that makes sense, a
//! selector that never changes).

use serde_json::{Value, json};

use crate::apiserver::admission::defaults;
use crate::apiserver::error::Cause;
use crate::apiserver::selectors::LabelSelector;

fn set_default(map: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

/// A pod template gets the Pod defaults that belong to the spec; what the
/// ServiceAccount and Priority admission plugins add to a Pod is added to
/// the Pod, not its template.
fn template_defaults(template: &mut Value) {
    let given: Vec<String> = template
        .pointer("/spec")
        .and_then(Value::as_object)
        .map(|spec| spec.keys().cloned().collect())
        .unwrap_or_default();
    defaults::pod(template, false);
    if let Some(map) = template.as_object_mut() {
        map.remove("status");
    }
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        for admitted in [
            "serviceAccountName",
            "serviceAccount",
            "priority",
            "preemptionPolicy",
        ] {
            if !given.iter().any(|key| key == admitted) {
                spec.remove(admitted);
            }
        }
    }
}

/// Deployment defaults: one replica, RollingUpdate with 25% surge and
/// unavailability, ten old ReplicaSets kept, a 600 s progress deadline.
pub fn deployment(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    set_default(spec, "strategy", json!({}));
    if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            set_default(strategy, "rollingUpdate", json!({}));
            if let Some(rolling) = strategy
                .get_mut("rollingUpdate")
                .and_then(Value::as_object_mut)
            {
                set_default(rolling, "maxUnavailable", json!("25%"));
                set_default(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    if let Some(template) = spec.get_mut("template") {
        template_defaults(template);
    }
}

/// ReplicaSet defaults: one replica.
pub fn replica_set(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    if let Some(template) = spec.get_mut("template") {
        template_defaults(template);
    }
}

/// Whether a label selector (matchLabels and matchExpressions) selects
/// `labels`.
pub fn selector_matches(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let object = serde_json::json!({"metadata": {"labels": labels}});
    LabelSelector::from_object(selector).is_some_and(|s| s.matches(&object))
}

fn is_empty_selector(selector: &Value) -> bool {
    let empty = |key: &str| {
        selector.get(key).is_none_or(|v| {
            v.as_object().is_some_and(serde_json::Map::is_empty)
                || v.as_array().is_some_and(Vec::is_empty)
        })
    };
    empty("matchLabels") && empty("matchExpressions")
}

/// What a Deployment or ReplicaSet must satisfy on every write.
pub fn validate(kind: &str, object: &Value, causes: &mut Vec<Cause>) {
    match object.pointer("/spec/selector") {
        None | Some(Value::Null) => causes.push(Cause::invalid("spec.selector", "Required value")),
        Some(selector) if is_empty_selector(selector) => causes.push(Cause::invalid(
            "spec.selector",
            "Invalid value: \"null\": empty selector is invalid for deployment",
        )),
        Some(selector) => {
            let empty = serde_json::Map::new();
            let labels = object
                .pointer("/spec/template/metadata/labels")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            if !selector_matches(selector, labels) {
                causes.push(Cause::invalid(
                    "spec.template.metadata.labels",
                    "Invalid value: `selector` does not match template `labels`",
                ));
            }
        }
    }
    if object
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        causes.push(Cause::invalid(
            "spec.template.spec.containers",
            "Required value",
        ));
    }
    if object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .is_some_and(|n| n < 0)
    {
        causes.push(Cause::invalid(
            "spec.replicas",
            "Invalid value: must be greater than or equal to 0",
        ));
    }
    if kind == "Deployment"
        && object.pointer("/spec/strategy/type") == Some(&json!("Recreate"))
        && object
            .pointer("/spec/strategy/rollingUpdate")
            .is_some_and(|v| !v.is_null())
    {
        causes.push(Cause::invalid(
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ));
    }
}

/// On update: the selector is immutable in `apps/v1`.
pub fn update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let selector = |o: &Value| o.pointer("/spec/selector").cloned();
    if selector(old) != selector(new) {
        causes.push(Cause::invalid(
            "spec.selector",
            "Invalid value: field is immutable",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_gets_the_rolling_update_defaults() {
        let mut object = json!({"spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}},
                         "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
        }});
        deployment(&mut object);
        assert_eq!(object["spec"]["replicas"], 1);
        assert_eq!(
            object["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(object["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(object["spec"]["progressDeadlineSeconds"], 600);
        let template = &object["spec"]["template"];
        assert_eq!(template["spec"]["restartPolicy"], "Always");
        assert_eq!(
            template["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert!(template.get("status").is_none());
        assert!(template["spec"].get("serviceAccountName").is_none());
        let mut causes = Vec::new();
        validate("Deployment", &object, &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
    }

    #[test]
    fn recreate_gets_no_rolling_parameters() {
        let mut object = json!({"spec": {"strategy": {"type": "Recreate"}}});
        deployment(&mut object);
        assert_eq!(object["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn a_selector_that_misses_the_template_is_refused() {
        let object = json!({"spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                         "spec": {"containers": [{"name": "c"}]}}
        }});
        let mut causes = Vec::new();
        validate("ReplicaSet", &object, &mut causes);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        let mut causes = Vec::new();
        update(
            &object,
            &json!({"spec": {"selector": {"matchLabels": {"app": "b"}}}}),
            &mut causes,
        );
        assert_eq!(causes[0].field, "spec.selector");
    }

    #[test]
    fn match_expressions_select_as_kubernetes_does() {
        let labels = json!({"app": "a", "tier": "db"});
        let labels = labels.as_object().expect("map");
        let selector = json!({"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["db", "cache"]},
            {"key": "gone", "operator": "DoesNotExist"}
        ]});
        assert!(selector_matches(&selector, labels));
        let selector =
            json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]});
        assert!(!selector_matches(&selector, labels));
    }
}
