//! What the real API server adds to and forbids in the built-in kinds the
//! operator writes: Pods, Services and PersistentVolumeClaims.
//!
//! An operator that compares desired and observed state must see the same
//! defaulted fields it would see on Kubernetes, or it would either fight
//! the server forever or pass tests and fail in production. Immutable fields
//! are refused with the messages Kubernetes uses.

use serde_json::{Map, Value, json};

use crate::apiserver::error::Cause;

fn set_default(map: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

fn object_at<'v>(
    value: &'v mut Value,
    key: &str,
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let map = value.as_object_mut()?;
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), json!({}));
    }
    map.get_mut(key)?.as_object_mut()
}

/// The DefaultTolerationSeconds admission plugin: a pod that does not
/// tolerate the not-ready (or unreachable) NoExecute taint by itself
/// (a toleration with that key or none, and effect NoExecute or none)
/// tolerates it for 300 s.
fn default_toleration_seconds(spec: &mut Map<String, Value>) {
    let list = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(tolerations) = list.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let matches = |field: &str, wanted: &str| {
                t[field]
                    .as_str()
                    .is_none_or(|v| v.is_empty() || v == wanted)
            };
            matches("key", key) && matches("effect", "NoExecute")
        });
        if !tolerated {
            tolerations.push(json!({
                "key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300
            }));
        }
    }
}

/// Pod defaults (`pkg/apis/core/v1/defaults.go` and the admission plugins
/// enabled by default).
pub fn pod(pod: &mut Value, create: bool) {
    if let Some(spec) = object_at(pod, "spec") {
        set_default(spec, "restartPolicy", json!("Always"));
        set_default(spec, "terminationGracePeriodSeconds", json!(30));
        set_default(spec, "dnsPolicy", json!("ClusterFirst"));
        set_default(spec, "schedulerName", json!("default-scheduler"));
        set_default(spec, "securityContext", json!({}));
        set_default(spec, "enableServiceLinks", json!(true));
        set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        set_default(spec, "priority", json!(0));
        set_default(spec, "serviceAccountName", json!("default"));
        let account = spec
            .get("serviceAccountName")
            .cloned()
            .unwrap_or(json!("default"));
        set_default(spec, "serviceAccount", account);
        if create {
            default_toleration_seconds(spec);
        }
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(containers)) = spec.get_mut(list) {
                for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                    container_defaults(container);
                }
            }
        }
        if let Some(Value::Array(volumes)) = spec.get_mut("volumes") {
            for volume in volumes.iter_mut() {
                if let Some(secret) = volume.get_mut("secret").and_then(Value::as_object_mut) {
                    set_default(secret, "defaultMode", json!(420));
                }
                if let Some(cm) = volume.get_mut("configMap").and_then(Value::as_object_mut) {
                    set_default(cm, "defaultMode", json!(420));
                }
                if let Some(dir) = volume.get_mut("emptyDir").and_then(Value::as_object_mut) {
                    let _ = dir;
                }
            }
        }
    }
    let qos = qos_class(pod);
    if let Some(status) = object_at(pod, "status") {
        set_default(status, "phase", json!("Pending"));
        set_default(status, "qosClass", json!(qos));
    }
}

fn container_defaults(container: &mut serde_json::Map<String, Value>) {
    set_default(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    set_default(container, "terminationMessagePolicy", json!("File"));
    set_default(container, "resources", json!({}));
    let image = container
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let latest = !image.contains(':') || image.ends_with(":latest");
    let latest = latest && !image.contains('@');
    set_default(
        container,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    if let Some(Value::Array(ports)) = container.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(port, "protocol", json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = container.get_mut(probe).and_then(Value::as_object_mut) {
            set_default(probe, "timeoutSeconds", json!(1));
            set_default(probe, "periodSeconds", json!(10));
            set_default(probe, "successThreshold", json!(1));
            set_default(probe, "failureThreshold", json!(3));
            if let Some(http) = probe.get_mut("httpGet").and_then(Value::as_object_mut) {
                set_default(http, "path", json!("/"));
                set_default(http, "scheme", json!("HTTP"));
            }
        }
    }
}

fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for container in &containers {
        let requests = container
            .pointer("/resources/requests")
            .and_then(Value::as_object);
        let limits = container
            .pointer("/resources/limits")
            .and_then(Value::as_object);
        if requests.is_some_and(|r| !r.is_empty()) || limits.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        let complete = ["cpu", "memory"].iter().all(|resource| {
            let limit = limits.and_then(|l| l.get(*resource));
            let request = requests.and_then(|r| r.get(*resource)).or(limit);
            limit.is_some() && request == limit
        });
        guaranteed &= complete;
    }
    if guaranteed {
        "Guaranteed"
    } else if any {
        "Burstable"
    } else {
        "BestEffort"
    }
}

/// Service defaults; `cluster_ip` is allocated by the caller when the
/// Service needs one.
pub fn service(service: &mut Value, cluster_ip: Option<String>) {
    if let Some(spec) = object_at(service, "spec") {
        set_default(spec, "type", json!("ClusterIP"));
        set_default(spec, "sessionAffinity", json!("None"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        if let Some(ip) = cluster_ip {
            spec.insert("clusterIP".into(), json!(ip));
        }
        if let Some(ip) = spec.get("clusterIP").cloned() {
            set_default(spec, "clusterIPs", json!([ip]));
        }
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                set_default(port, "protocol", json!("TCP"));
                if let Some(number) = port.get("port").cloned() {
                    set_default(port, "targetPort", number);
                }
            }
        }
    }
    if let Some(status) = object_at(service, "status") {
        set_default(status, "loadBalancer", json!({}));
    }
}

/// Whether a Service needs a cluster IP allocated (not headless, not
/// ExternalName, none given).
pub fn service_needs_ip(service: &Value) -> bool {
    let spec = service.get("spec");
    let type_ = spec
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let ip = spec
        .and_then(|s| s.get("clusterIP"))
        .and_then(Value::as_str);
    type_ != "ExternalName" && ip.is_none_or(str::is_empty)
}

/// A Secret without a type is `Opaque` (kubectl's `create secret generic`
/// leaves the type to the server).
pub fn secret(secret: &mut Value) {
    if let Some(fields) = secret.as_object_mut() {
        set_default(fields, "type", json!("Opaque"));
    }
}

pub fn pvc(pvc: &mut Value) {
    if let Some(spec) = object_at(pvc, "spec") {
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(status) = object_at(pvc, "status") {
        set_default(status, "phase", json!("Pending"));
    }
}

/// Service rules on update: `spec.clusterIP` never changes once set (an
/// update that leaves it empty keeps the allocated one, as Kubernetes does).
pub fn service_update(old: &Value, new: &mut Value, causes: &mut Vec<Cause>) {
    let old_ip = old.pointer("/spec/clusterIP").cloned();
    let new_ip = new
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match (old_ip, new_ip) {
        (Some(old_ip), None) => {
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("clusterIP".into(), old_ip.clone());
                if spec.get("clusterIPs").is_none() {
                    spec.insert("clusterIPs".into(), json!([old_ip]));
                }
            }
        }
        (Some(old_ip), Some(new_ip)) if new_ip.is_empty() => {
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("clusterIP".into(), old_ip.clone());
                spec.insert("clusterIPs".into(), json!([old_ip]));
            }
        }
        (Some(old_ip), Some(new_ip)) if old_ip.as_str() != Some(new_ip.as_str()) => {
            causes.push(Cause::invalid(
                "spec.clusterIPs[0]",
                format!("Invalid value: [\"{new_ip}\"]: may not change once set"),
            ));
            causes.push(Cause::invalid(
                "spec.clusterIP",
                format!("Invalid value: \"{new_ip}\": field is immutable"),
            ));
        }
        _ => {}
    }
}

/// PVC rules on update: the spec is immutable except the storage request,
/// which may grow but never shrink.
pub fn pvc_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let request = |v: &Value| {
        v.pointer("/spec/resources/requests/storage")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (old_size, new_size) = (request(old), request(new));
    if let (Some(old_size), Some(new_size)) = (&old_size, &new_size)
        && let (Some(old_bytes), Some(new_bytes)) = (quantity(old_size), quantity(new_size))
        && new_bytes < old_bytes
    {
        causes.push(Cause {
            field: "spec.resources.requests.storage".into(),
            message: "Forbidden: field can not be less than previous value".into(),
            reason: "FieldValueForbidden",
        });
        return;
    }
    let mut old_spec = old.get("spec").cloned().unwrap_or(json!({}));
    let mut new_spec = new.get("spec").cloned().unwrap_or(json!({}));
    for spec in [&mut old_spec, &mut new_spec] {
        if let Some(requests) = spec
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
        {
            requests.remove("storage");
        }
        if let Some(map) = spec.as_object_mut() {
            map.remove("volumeAttributesClassName");
        }
    }
    // Binding fills in volumeName once.
    if old_spec.get("volumeName").is_none()
        && let Some(map) = new_spec.as_object_mut()
    {
        map.remove("volumeName");
    }
    if old_spec != new_spec {
        let changed = [
            "storageClassName",
            "accessModes",
            "volumeMode",
            "selector",
            "volumeName",
            "dataSource",
        ]
        .into_iter()
        .find(|field| old_spec.get(field) != new_spec.get(field));
        let detail = changed
            .map(|f| format!(" (spec.{f} changed)"))
            .unwrap_or_default();
        causes.push(Cause {
            field: "spec".into(),
            message: format!(
                "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims{detail}"
            ),
            reason: "FieldValueForbidden",
        });
    }
}

/// Pod rules on update: the spec is immutable except container images,
/// `activeDeadlineSeconds`, added tolerations and `terminationGracePeriodSeconds`;
/// `nodeName` may be set once (binding).
pub fn pod_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    fn comparable(spec: Option<&Value>, keep_node: bool) -> Value {
        let mut spec = spec.cloned().unwrap_or(json!({}));
        if let Some(map) = spec.as_object_mut() {
            for field in [
                "activeDeadlineSeconds",
                "terminationGracePeriodSeconds",
                "tolerations",
            ] {
                map.remove(field);
            }
            if !keep_node {
                map.remove("nodeName");
            }
            for list in ["containers", "initContainers"] {
                if let Some(Value::Array(containers)) = map.get_mut(list) {
                    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                        container.remove("image");
                    }
                }
            }
        }
        spec
    }
    let node_was_set = old
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let old_tolerations = old
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let new_tolerations = new
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerations_kept = old_tolerations.iter().all(|t| new_tolerations.contains(t));
    if comparable(old.get("spec"), node_was_set) != comparable(new.get("spec"), node_was_set)
        || !tolerations_kept
    {
        causes.push(Cause {
            field: "spec".into(),
            message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds`".into(),
            reason: "FieldValueForbidden",
        });
    }
}

/// A Kubernetes quantity in base units (bytes for storage).
pub fn quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        other => {
            let exponent: i32 = other.strip_prefix(['e', 'E'])?.parse().ok()?;
            10f64.powi(exponent)
        }
    };
    Some(number * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_without_a_type_is_opaque() {
        let mut untyped = json!({"data": {}});
        secret(&mut untyped);
        assert_eq!(untyped["type"], "Opaque");
        let mut typed = json!({"type": "kubernetes.io/tls"});
        secret(&mut typed);
        assert_eq!(typed["type"], "kubernetes.io/tls");
    }

    #[test]
    fn quantities_compare_across_suffixes() {
        assert_eq!(quantity("1Gi"), Some(1024.0 * 1024.0 * 1024.0));
        assert!(quantity("500Mi") < quantity("1Gi"));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("abc"), None);
    }

    #[test]
    fn shrinking_a_claim_is_forbidden_and_growing_is_allowed() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}});
        let mut causes = Vec::new();
        pvc_update(
            &old,
            &json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}),
            &mut causes,
        );
        assert!(causes.is_empty());
        pvc_update(
            &old,
            &json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}}),
            &mut causes,
        );
        assert_eq!(causes.len(), 1);
    }

    #[test]
    fn qos_class_follows_requests_and_limits() {
        let pod = json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&pod), "Guaranteed");
        let pod = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(qos_class(&pod), "BestEffort");
    }

    #[test]
    fn default_tolerations_are_added_for_the_taints_a_pod_does_not_tolerate() {
        let keys = |pod: &Value| -> Vec<(String, i64)> {
            pod["spec"]["tolerations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let key = t["key"].as_str().unwrap_or("*").to_owned();
                    (key, t["tolerationSeconds"].as_i64().unwrap_or(-1))
                })
                .collect()
        };
        let mut own = json!({"spec": {"containers": [], "tolerations": [
            {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 5}
        ]}});
        pod(&mut own, true);
        assert_eq!(
            keys(&own),
            [
                ("dedicated".to_owned(), -1),
                ("node.kubernetes.io/unreachable".to_owned(), 5),
                ("node.kubernetes.io/not-ready".to_owned(), 300)
            ]
        );
        let mut everything =
            json!({"spec": {"containers": [], "tolerations": [{"operator": "Exists"}]}});
        pod(&mut everything, true);
        assert_eq!(keys(&everything), [("*".to_owned(), -1)]);
    }
}
