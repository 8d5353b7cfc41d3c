//! Cells of the smaller built-in kinds' columns, as kube-apiserver's
//! printers compute them: endpoints, a Service's external IP and
//! selector, disruption budgets and role bindings.

use serde_json::Value;

fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// ENDPOINTS: up to three `ip:port` pairs, then `+ N more...`.
pub fn endpoints(object: &Value) -> String {
    const SHOWN: usize = 3;
    let mut all = Vec::new();
    for subset in array(object.get("subsets")) {
        let addresses = array(subset.get("addresses"));
        let ip = |a: &Value| a.get("ip").and_then(Value::as_str).unwrap_or("").to_owned();
        let ports = array(subset.get("ports"));
        if ports.is_empty() {
            all.extend(addresses.iter().map(ip));
            continue;
        }
        for port in ports {
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for address in addresses {
                let host = ip(address);
                all.push(if host.contains(':') {
                    format!("[{host}]:{number}")
                } else {
                    format!("{host}:{number}")
                });
            }
        }
    }
    match all.len() {
        0 => "<none>".to_owned(),
        n if n > SHOWN => format!("{} + {} more...", all[..SHOWN].join(","), n - SHOWN),
        _ => all.join(","),
    }
}

/// EXTERNAL-IP of a Service by its type.
pub fn service_external_ip(service: &Value) -> String {
    let external: Vec<&str> = array(service.pointer("/spec/externalIPs"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
    {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_owned(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut all: Vec<String> = array(service.pointer("/status/loadBalancer/ingress"))
                .iter()
                .filter_map(|i| {
                    i.get("ip")
                        .or_else(|| i.get("hostname"))
                        .and_then(Value::as_str)
                })
                .map(str::to_owned)
                .collect();
            all.sort();
            all.dedup();
            all.extend(external.iter().map(|s| (*s).to_owned()));
            if all.is_empty() {
                "<pending>".to_owned()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => service
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// SELECTOR: `key=value` pairs in key order, or `<none>`.
pub fn selector(service: &Value) -> String {
    let pairs: Vec<String> = service
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    }
}

/// An int-or-string field as text, `N/A` when unset.
pub fn int_or_string(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        _ => "N/A".to_owned(),
    }
}

/// ROLE of a binding: `Kind/name`.
pub fn role_ref(binding: &Value) -> String {
    let field = |name: &str| {
        binding
            .pointer(&format!("/roleRef/{name}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    format!("{}/{}", field("kind"), field("name"))
}

/// The subjects of one kind in a binding, comma-separated; service
/// accounts as `namespace/name`.
pub fn subjects(binding: &Value, kind: &str) -> String {
    array(binding.get("subjects"))
        .iter()
        .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
        .map(|s| {
            let name = s.get("name").and_then(Value::as_str).unwrap_or("");
            match s.get("namespace").and_then(Value::as_str) {
                Some(namespace) if kind == "ServiceAccount" => format!("{namespace}/{name}"),
                _ => name.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn endpoints_show_three_pairs_then_a_count() {
        let endpoints = json!({"subsets": [{
            "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "ports": [{"port": 5432}, {"port": 8008}]}]});
        assert_eq!(
            super::endpoints(&endpoints),
            "10.0.0.1:5432,10.0.0.2:5432,10.0.0.1:8008 + 1 more..."
        );
        assert_eq!(super::endpoints(&json!({})), "<none>");
        let no_ports = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]});
        assert_eq!(super::endpoints(&no_ports), "10.0.0.1");
    }

    #[test]
    fn external_ip_depends_on_the_service_type() {
        let cases = [
            (json!({"spec": {"type": "ClusterIP"}}), "<none>"),
            (json!({"spec": {"externalIPs": ["1.2.3.4"]}}), "1.2.3.4"),
            (json!({"spec": {"type": "LoadBalancer"}}), "<pending>"),
            (
                json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}}),
                "5.6.7.8",
            ),
            (
                json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
                "db.example.com",
            ),
        ];
        for (service, expected) in cases {
            assert_eq!(service_external_ip(&service), expected, "{service}");
        }
    }

    #[test]
    fn bindings_budgets_and_selectors_print_like_kubectl() {
        let binding = json!({
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "ann"}, {"kind": "User", "name": "bob"},
                {"kind": "ServiceAccount", "name": "tusk", "namespace": "tusk-system"}]});
        assert_eq!(role_ref(&binding), "ClusterRole/view");
        assert_eq!(subjects(&binding, "User"), "ann, bob");
        assert_eq!(subjects(&binding, "ServiceAccount"), "tusk-system/tusk");
        assert_eq!(subjects(&binding, "Group"), "");
        assert_eq!(int_or_string(Some(&json!(1))), "1");
        assert_eq!(int_or_string(Some(&json!("50%"))), "50%");
        assert_eq!(int_or_string(None), "N/A");
        assert_eq!(
            selector(&json!({"spec": {"selector": {"app": "pg", "role": "primary"}}})),
            "app=pg,role=primary"
        );
        assert_eq!(selector(&json!({"spec": {}})), "<none>");
    }
}
