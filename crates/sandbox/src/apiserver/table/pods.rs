//! A pod's READY, STATUS and RESTARTS cells, computed as kube-apiserver's
//! pod printer does: init containers first (`Init:1/2`,
//! `Init:CrashLoopBackOff`), then the containers' waiting or terminated
//! reasons (`ContainerCreating`, `CrashLoopBackOff`, `Completed`), then
//! `Terminating` for a pod being deleted.

use serde_json::Value;

use crate::apiserver::table::cells::since;

fn list<'v>(pod: &'v Value, pointer: &str) -> &'v [Value] {
    pod.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A sidecar: an init container that restarts always and runs beside the
/// main containers.
fn restartable_init(pod: &Value, name: &str) -> bool {
    list(pod, "/spec/initContainers")
        .iter()
        .any(|c| str_at(c, "/name") == name && str_at(c, "/restartPolicy") == "Always")
}

fn condition_true(pod: &Value, kind: &str) -> bool {
    list(pod, "/status/conditions")
        .iter()
        .any(|c| str_at(c, "/type") == kind && str_at(c, "/status") == "True")
}

/// The reason a terminated container gives, or its signal or exit code.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    let reason = str_at(terminated, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    match terminated.get("signal").and_then(Value::as_i64) {
        Some(signal) if signal != 0 => format!("{prefix}Signal:{signal}"),
        _ => {
            let code = terminated
                .get("exitCode")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            format!("{prefix}ExitCode:{code}")
        }
    }
}

/// STATUS while init containers run, or `None` once they are done.
fn init_status(pod: &Value) -> Option<String> {
    let total = list(pod, "/spec/initContainers").len();
    for (index, container) in list(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        let terminated = container.pointer("/state/terminated");
        let waiting = str_at(container, "/state/waiting/reason");
        let exit = terminated
            .and_then(|t| t.get("exitCode"))
            .and_then(Value::as_i64);
        if terminated.is_some() && exit == Some(0) {
            continue;
        }
        if restartable_init(pod, str_at(container, "/name"))
            && container.get("started") == Some(&Value::Bool(true))
        {
            continue;
        }
        return Some(match terminated {
            Some(terminated) => terminated_reason(terminated, "Init:"),
            None if !waiting.is_empty() && waiting != "PodInitializing" => {
                format!("Init:{waiting}")
            }
            None => format!("Init:{index}/{total}"),
        });
    }
    None
}

/// The STATUS column.
pub fn status(pod: &Value) -> String {
    let phase = str_at(pod, "/status/phase");
    let mut reason = match str_at(pod, "/status/reason") {
        "" => phase.to_owned(),
        given => given.to_owned(),
    };
    if list(pod, "/status/conditions")
        .iter()
        .any(|c| str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".to_owned();
    }
    let initializing = init_status(pod);
    if let Some(init) = &initializing {
        reason.clone_from(init);
    }
    if initializing.is_none() || condition_true(pod, "Initialized") {
        let mut running = false;
        for container in list(pod, "/status/containerStatuses").iter().rev() {
            let waiting = str_at(container, "/state/waiting/reason");
            if !waiting.is_empty() {
                reason = waiting.to_owned();
            } else if let Some(terminated) = container.pointer("/state/terminated") {
                reason = terminated_reason(terminated, "");
            } else if container.get("ready") == Some(&Value::Bool(true))
                && container.pointer("/state/running").is_some()
            {
                running = true;
            }
        }
        if reason == "Completed" && running {
            reason = if condition_true(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .to_owned();
        }
    }
    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
    if deleting && str_at(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".to_owned();
    }
    reason
}

/// The READY column: ready containers (sidecars included) over all.
pub fn ready(pod: &Value) -> String {
    let sidecars: Vec<&str> = list(pod, "/spec/initContainers")
        .iter()
        .filter(|c| str_at(c, "/restartPolicy") == "Always")
        .map(|c| str_at(c, "/name"))
        .collect();
    let total = list(pod, "/spec/containers").len() + sidecars.len();
    let is_ready = |c: &&Value| c.get("ready") == Some(&Value::Bool(true));
    let main = list(pod, "/status/containerStatuses")
        .iter()
        .filter(|c| is_ready(c) && c.pointer("/state/running").is_some())
        .count();
    let side = list(pod, "/status/initContainerStatuses")
        .iter()
        .filter(|c| sidecars.contains(&str_at(c, "/name")) && is_ready(c))
        .count();
    format!("{}/{total}", main + side)
}

/// The RESTARTS column: the count, and how long ago the last container
/// finished (`3 (2m ago)`).
pub fn restarts(pod: &Value, now: i64) -> String {
    let statuses = list(pod, "/status/containerStatuses")
        .iter()
        .chain(list(pod, "/status/initContainerStatuses"));
    let mut count = 0;
    let mut last: Option<jiff::Timestamp> = None;
    for container in statuses {
        count += container
            .get("restartCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let finished = str_at(container, "/lastState/terminated/finishedAt")
            .parse()
            .ok();
        last = last.max(finished);
    }
    match last {
        Some(at) if count != 0 => format!("{count} ({} ago)", since(at, now)),
        _ => count.to_string(),
    }
}

/// The wide columns: IP, NODE, NOMINATED NODE, READINESS GATES.
pub fn wide(pod: &Value) -> [String; 4] {
    let or_none = |text: &str| {
        if text.is_empty() {
            "<none>".to_owned()
        } else {
            text.to_owned()
        }
    };
    let ip = list(pod, "/status/podIPs")
        .first()
        .map_or("", |ip| str_at(ip, "/ip"));
    let gates = list(pod, "/spec/readinessGates");
    let readiness = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let met = gates
            .iter()
            .filter(|g| condition_true(pod, str_at(g, "/conditionType")))
            .count();
        format!("{met}/{}", gates.len())
    };
    [
        or_none(ip),
        or_none(str_at(pod, "/spec/nodeName")),
        or_none(str_at(pod, "/status/nominatedNodeName")),
        readiness,
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec, "status": status})
    }

    fn one_container() -> Value {
        json!({"containers": [{"name": "pg"}]})
    }

    #[test]
    fn status_follows_the_kubectl_rules() {
        let running = json!({"running": {}});
        let cases = [
            (
                "running",
                pod(
                    one_container(),
                    json!({"phase": "Running",
                "containerStatuses": [{"name": "pg", "ready": true, "state": running}]}),
                ),
                "Running",
            ),
            (
                "pending",
                pod(one_container(), json!({"phase": "Pending"})),
                "Pending",
            ),
            (
                "creating",
                pod(
                    one_container(),
                    json!({"phase": "Pending",
                "containerStatuses": [{"name": "pg", "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
                ),
                "ContainerCreating",
            ),
            (
                "crash loop",
                pod(
                    one_container(),
                    json!({"phase": "Running",
                "containerStatuses": [{"name": "pg", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
                ),
                "CrashLoopBackOff",
            ),
            (
                "completed",
                pod(
                    one_container(),
                    json!({"phase": "Succeeded",
                "containerStatuses": [{"name": "pg", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
                ),
                "Completed",
            ),
            (
                "killed",
                pod(
                    one_container(),
                    json!({"phase": "Failed",
                "containerStatuses": [{"name": "pg", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
                ),
                "Signal:9",
            ),
            (
                "exit code",
                pod(
                    one_container(),
                    json!({"phase": "Failed",
                "containerStatuses": [{"name": "pg", "state": {"terminated": {"exitCode": 3}}}]}),
                ),
                "ExitCode:3",
            ),
            (
                "evicted",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "reason": "Evicted"}),
                ),
                "Evicted",
            ),
            (
                "init running",
                pod(
                    json!({"initContainers": [{"name": "a"}, {"name": "b"}], "containers": [{"name": "pg"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 0}}},
                    {"name": "b", "state": {"running": {}}}]}),
                ),
                "Init:1/2",
            ),
            (
                "init crash",
                pod(
                    json!({"initContainers": [{"name": "a"}], "containers": [{"name": "pg"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
                ),
                "Init:CrashLoopBackOff",
            ),
            (
                "init failed",
                pod(
                    json!({"initContainers": [{"name": "a"}], "containers": [{"name": "pg"}]}),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}),
                ),
                "Init:Error",
            ),
            (
                "gated",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                ),
                "SchedulingGated",
            ),
        ];
        for (name, pod, expected) in cases {
            assert_eq!(status(&pod), expected, "{name}");
        }
        let mut deleting = pod(one_container(), json!({"phase": "Running"}));
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert_eq!(status(&deleting), "Terminating");
        deleting["status"]["phase"] = json!("Succeeded");
        assert_eq!(status(&deleting), "Succeeded");
    }

    #[test]
    fn ready_counts_running_ready_containers_and_sidecars() {
        let pod = pod(
            json!({"initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
                   "containers": [{"name": "pg"}, {"name": "exporter"}]}),
            json!({"initContainerStatuses": [{"name": "proxy", "ready": true, "started": true}],
                   "containerStatuses": [
                       {"name": "pg", "ready": true, "state": {"running": {}}},
                       {"name": "exporter", "ready": false, "state": {"running": {}}}]}),
        );
        assert_eq!(ready(&pod), "2/3");
    }

    #[test]
    fn restarts_say_how_long_ago_the_last_one_was() {
        let now = 1_700_000_000;
        let finished = jiff::Timestamp::from_second(now - 95)
            .expect("time")
            .to_string();
        let restarted = pod(
            one_container(),
            json!({"containerStatuses": [{"name": "pg", "restartCount": 3,
                "lastState": {"terminated": {"finishedAt": finished}}}]}),
        );
        assert_eq!(restarts(&restarted, now), "3 (95s ago)");
        let fresh = pod(
            one_container(),
            json!({"containerStatuses": [{"name": "pg", "restartCount": 0}]}),
        );
        assert_eq!(restarts(&fresh, now), "0");
    }

    #[test]
    fn wide_cells_show_ip_node_and_readiness_gates() {
        let pod = pod(
            json!({"nodeName": "sandbox", "readinessGates": [{"conditionType": "example.com/lb"}]}),
            json!({"podIPs": [{"ip": "10.0.0.5"}], "conditions": [{"type": "example.com/lb", "status": "True"}]}),
        );
        assert_eq!(
            wide(&pod),
            ["10.0.0.5", "sandbox", "<none>", "1/1"].map(String::from)
        );
        let bare = json!({"spec": {}, "status": {}});
        assert_eq!(
            wide(&bare),
            ["<none>", "<none>", "<none>", "<none>"].map(String::from)
        );
    }
}
