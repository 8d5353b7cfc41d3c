//! A container's environment: `env` values, `valueFrom` references,
//! `envFrom`, and `$(VAR)` expansion, as the kubelet computes them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::input_error::InputError;
use super::inputs::PodInputs;

/// The value of a downward API field of `pod`.
pub fn field_value(pod: &Pod, path: &str) -> Result<String, InputError> {
    let meta = &pod.metadata;
    let pairs = |map: Option<&BTreeMap<String, String>>| {
        map.into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let keyed = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix("']"))
            .map(str::to_owned)
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => pairs(meta.labels.as_ref()),
        "metadata.annotations" => pairs(meta.annotations.as_ref()),
        "spec.nodeName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        "spec.serviceAccountName" => pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into()),
        "status.podIP" => pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default(),
        "status.hostIP" => "127.0.0.1".into(),
        _ => {
            if let Some(key) = keyed("metadata.labels['") {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(key) = keyed("metadata.annotations['") {
                meta.annotations
                    .as_ref()
                    .and_then(|a| a.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(InputError::UnsupportedField(path.to_owned()));
            }
        }
    };
    Ok(value)
}

/// Expands `$(NAME)` from `defined`; `$$(NAME)` is a literal `$(NAME)`, and
/// unknown names stay as written, as on Kubernetes.
pub fn expand(text: &str, defined: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(inner) = tail.strip_prefix("$(")
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match defined.get(name) {
                Some(value) => out.push_str(value),
                None => out.push_str(&tail[..end + 3]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The container's variables in order (later ones win), before path
/// translation: `services` (the service links) first, so the container's
/// own variables override them and can refer to them.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    inputs: &PodInputs,
    services: &[(String, String)],
) -> Result<Vec<(String, String)>, InputError> {
    let mut vars: Vec<(String, String)> = services.to_vec();
    let mut defined: BTreeMap<String, String> = services.iter().cloned().collect();
    let set = |vars: &mut Vec<(String, String)>,
               defined: &mut BTreeMap<String, String>,
               name: String,
               value: String| {
        defined.insert(name.clone(), value.clone());
        vars.push((name, value));
    };
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let data = if let Some(secret) = &from.secret_ref {
            inputs.secret(&secret.name, secret.optional.unwrap_or(false))?
        } else if let Some(config_map) = &from.config_map_ref {
            inputs.config_map(&config_map.name, config_map.optional.unwrap_or(false))?
        } else {
            BTreeMap::new()
        };
        for (key, value) in data {
            set(
                &mut vars,
                &mut defined,
                format!("{prefix}{key}"),
                lossy(&value),
            );
        }
    }
    for env in container.env.iter().flatten() {
        let value = match &env.value_from {
            None => expand(env.value.as_deref().unwrap_or(""), &defined),
            Some(from) => {
                if let Some(key) = &from.secret_key_ref {
                    let optional = key.optional.unwrap_or(false);
                    match inputs.secret(&key.name, optional)?.get(&key.key) {
                        Some(value) => lossy(value),
                        None if optional => continue,
                        None => {
                            return Err(InputError::KeyNotFound {
                                kind: "secret",
                                name: key.name.clone(),
                                key: key.key.clone(),
                            });
                        }
                    }
                } else if let Some(key) = &from.config_map_key_ref {
                    let optional = key.optional.unwrap_or(false);
                    match inputs.config_map(&key.name, optional)?.get(&key.key) {
                        Some(value) => lossy(value),
                        None if optional => continue,
                        None => {
                            return Err(InputError::KeyNotFound {
                                kind: "configmap",
                                name: key.name.clone(),
                                key: key.key.clone(),
                            });
                        }
                    }
                } else if let Some(field) = &from.field_ref {
                    field_value(pod, &field.field_path)?
                } else {
                    return Err(InputError::UnsupportedField("resourceFieldRef".into()));
                }
            }
        };
        set(&mut vars, &mut defined, env.name.clone(), value);
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "db-1", "namespace": "shop", "uid": "u-1", "labels": {"role": "primary"}},
            "spec": {"containers": [{
                "name": "main",
                "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
                "env": [
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    {"name": "ROLE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['role']"}}},
                    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                    {"name": "ADDR", "value": "$(IP):5432 $$(IP) $(NOPE)"}
                ]
            }]},
            "status": {"podIP": "127.1.0.9"}
        }))
        .expect("pod")
    }

    #[test]
    fn values_references_and_expansion_resolve_like_the_kubelet() {
        let pod = pod();
        let mut inputs = PodInputs::default();
        inputs.secrets.insert(
            "creds".into(),
            BTreeMap::from([("password".into(), b"pw".to_vec())]),
        );
        inputs.config_maps.insert(
            "settings".into(),
            BTreeMap::from([("mode".into(), b"fast".to_vec())]),
        );
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        let env: BTreeMap<String, String> = container_env(&pod, container, &inputs, &[])
            .expect("env")
            .into_iter()
            .collect();
        assert_eq!(env["CFG_mode"], "fast");
        assert_eq!(env["POD"], "db-1");
        assert_eq!(env["NS"], "shop");
        assert_eq!(env["UID"], "u-1");
        assert_eq!(env["ROLE"], "primary");
        assert_eq!(env["IP"], "127.1.0.9");
        assert_eq!(env["PASSWORD"], "pw");
        assert_eq!(env["MODE"], "fast");
        assert_eq!(env["ADDR"], "127.1.0.9:5432 $(IP) $(NOPE)");
    }

    #[test]
    fn a_missing_secret_key_is_reported() {
        let pod = pod();
        let mut inputs = PodInputs::default();
        inputs.secrets.insert("creds".into(), BTreeMap::new());
        inputs
            .config_maps
            .insert("settings".into(), BTreeMap::new());
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        let error = container_env(&pod, container, &inputs, &[]).expect_err("missing key");
        assert!(matches!(error, InputError::KeyNotFound { ref key, .. } if key == "password"));
    }
}
