//! Pod validation beyond decoding, as kube-apiserver's
//! `ValidatePodCreate` does it for what the sandbox acts on: at least one
//! container, and user and group ids within Linux's non-negative 31-bit
//! range (`IsValidUserID`/`IsValidGroupID`), so that no id can wrap into
//! root when the kubelet runs the container.

use serde_json::Value;

use crate::apiserver::error::Cause;

/// The largest user or group id Kubernetes accepts.
const MAX_ID: i64 = 2_147_483_647;

/// Causes for what the pod `object` gets wrong.
pub fn validate(object: &Value, causes: &mut Vec<Cause>) {
    if object
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        causes.push(Cause::invalid("spec.containers", "Required value"));
    }
    let Some(spec) = object.get("spec") else {
        return;
    };
    if let Some(context) = spec.get("securityContext") {
        let path = "spec.securityContext";
        for field in ["runAsUser", "runAsGroup", "fsGroup"] {
            check_id(context.get(field), &format!("{path}.{field}"), causes);
        }
        for (index, group) in list(context.get("supplementalGroups")).iter().enumerate() {
            check_id(
                Some(group),
                &format!("{path}.supplementalGroups[{index}]"),
                causes,
            );
        }
    }
    for kind in ["initContainers", "containers", "ephemeralContainers"] {
        for (index, container) in list(spec.get(kind)).iter().enumerate() {
            let path = format!("spec.{kind}[{index}].securityContext");
            if let Some(context) = container.get("securityContext") {
                for field in ["runAsUser", "runAsGroup"] {
                    check_id(context.get(field), &format!("{path}.{field}"), causes);
                }
            }
        }
    }
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn check_id(value: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return;
    };
    if value.as_i64().is_none_or(|id| !(0..=MAX_ID).contains(&id)) {
        causes.push(Cause::invalid(
            path,
            format!("Invalid value: {value}: must be between 0 and {MAX_ID}, inclusive"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(pod: Value) -> Vec<String> {
        let mut causes = Vec::new();
        validate(&pod, &mut causes);
        causes.into_iter().map(|c| c.field).collect()
    }

    #[test]
    fn ids_outside_the_31_bit_range_are_refused_wherever_they_are() {
        let pod = json!({"spec": {
            "securityContext": {"runAsUser": 4_294_967_296_i64, "fsGroup": -1,
                                "runAsGroup": 999, "supplementalGroups": [5, 2_147_483_648_i64]},
            "initContainers": [{"name": "i", "securityContext": {"runAsGroup": -5}}],
            "containers": [{"name": "c", "securityContext": {"runAsUser": 2_147_483_647}},
                           {"name": "d", "securityContext": {"runAsUser": 4_294_967_296_i64}}]
        }});
        assert_eq!(
            fields(pod),
            [
                "spec.securityContext.runAsUser",
                "spec.securityContext.fsGroup",
                "spec.securityContext.supplementalGroups[1]",
                "spec.initContainers[0].securityContext.runAsGroup",
                "spec.containers[1].securityContext.runAsUser",
            ]
        );
    }

    #[test]
    fn a_pod_without_containers_is_refused() {
        assert_eq!(
            fields(json!({"spec": {"containers": []}})),
            ["spec.containers"]
        );
    }
}
