//! A node's cells as kube-apiserver's node printer computes them.

use serde_json::Value;

const ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const ROLE_LABEL: &str = "kubernetes.io/role";

/// STATUS: `Ready`, `NotReady` or `Unknown` from the Ready condition, and
/// `SchedulingDisabled` for a cordoned node.
pub fn status(node: &Value) -> String {
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|c| c.get("status").and_then(Value::as_str) == Some("True"));
    let mut parts = vec![match ready {
        Some(true) => "Ready",
        Some(false) => "NotReady",
        None => "Unknown",
    }];
    if node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        parts.push("SchedulingDisabled");
    }
    parts.join(",")
}

/// ROLES: from `node-role.kubernetes.io/<role>` labels and the
/// `kubernetes.io/role` label, sorted; `<none>` without any.
pub fn roles(node: &Value) -> String {
    let mut roles: Vec<String> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| {
                    if let Some(role) = key.strip_prefix(ROLE_PREFIX) {
                        Some(role.to_owned())
                    } else if key == ROLE_LABEL {
                        value.as_str().map(str::to_owned)
                    } else {
                        None
                    }
                })
                .filter(|role| !role.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.join(",")
    }
}

/// The first address of a type (`InternalIP`, `ExternalIP`), or `<none>`.
pub fn address(node: &Value, kind: &str) -> String {
    node.pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|addresses| {
            addresses
                .iter()
                .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
        })
        .and_then(|a| a.get("address").and_then(Value::as_str))
        .unwrap_or("<none>")
        .to_owned()
}

/// A `status.nodeInfo` field, or `<unknown>`.
pub fn info(node: &Value, field: &str) -> String {
    node.pointer(&format!("/status/nodeInfo/{field}"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("<unknown>")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn status_reads_the_ready_condition_and_cordoning() {
        let node = |ready: Option<&str>, unschedulable: bool| {
            let conditions = ready.map_or(json!([]), |s| json!([{"type": "Ready", "status": s}]));
            json!({"spec": {"unschedulable": unschedulable}, "status": {"conditions": conditions}})
        };
        let cases = [
            (Some("True"), false, "Ready"),
            (Some("False"), false, "NotReady"),
            (Some("Unknown"), false, "NotReady"),
            (None, false, "Unknown"),
            (Some("True"), true, "Ready,SchedulingDisabled"),
        ];
        for (ready, unschedulable, expected) in cases {
            assert_eq!(status(&node(ready, unschedulable)), expected);
        }
    }

    #[test]
    fn roles_come_from_role_labels() {
        let node = json!({"metadata": {"labels": {
            "node-role.kubernetes.io/worker": "",
            "node-role.kubernetes.io/control-plane": "",
            "kubernetes.io/role": "edge",
            "kubernetes.io/hostname": "a"}}});
        assert_eq!(roles(&node), "control-plane,edge,worker");
        assert_eq!(roles(&json!({"metadata": {}})), "<none>");
    }

    #[test]
    fn addresses_and_info_fall_back_like_kubectl() {
        let node = json!({"status": {
            "addresses": [{"type": "Hostname", "address": "a"}, {"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {"osImage": "Debian GNU/Linux 13", "kernelVersion": ""}}});
        assert_eq!(address(&node, "InternalIP"), "127.0.0.1");
        assert_eq!(address(&node, "ExternalIP"), "<none>");
        assert_eq!(info(&node, "osImage"), "Debian GNU/Linux 13");
        assert_eq!(info(&node, "kernelVersion"), "<unknown>");
    }
}
