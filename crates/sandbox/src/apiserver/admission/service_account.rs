//! The ServiceAccount admission plugin's token volume
//! (`plugin/pkg/admission/serviceaccount` in kube-apiserver): unless the
//! pod or its ServiceAccount turns `automountServiceAccountToken` off, a
//! pod gets a projected volume `kube-api-access-<random>` (a bound token,
//! the cluster CA and the namespace) mounted read-only at
//! [`TOKEN_MOUNT_PATH`] in every container that does not already mount
//! something there.
//!
//! The ServiceAccount lookup and the refusal of a missing one live with the
//! Pod's kind rules, which can read storage; this module only rewrites the
//! pod.

use serde_json::{Value, json};

/// Where in-cluster clients look for the token, CA and namespace.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The prefix of the token volume's name.
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// The ConfigMap the root CA publisher keeps in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// kube-apiserver asks for a token of one hour and seven seconds, so the
/// kubelet's token can be told apart from a user's one-hour token.
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// Whether the pod should get a token: the pod's own setting, else the
/// ServiceAccount's, else yes.
pub fn should_automount(pod: &Value, account: &Value) -> bool {
    let setting = |object: &Value, pointer: &str| object.pointer(pointer).and_then(Value::as_bool);
    setting(pod, "/spec/automountServiceAccountToken")
        .or_else(|| setting(account, "/automountServiceAccountToken"))
        .unwrap_or(true)
}

/// The projected volume source kube-apiserver adds.
pub fn token_volume_source() -> Value {
    json!({
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [
                {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
            ]}}
        ]
    })
}

/// Adds the token volume and its mounts to `pod`. An existing
/// `kube-api-access-*` volume is reused; `suffix` names a new one.
pub fn mount_token(pod: &mut Value, suffix: &str) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|name| name.starts_with(TOKEN_VOLUME_PREFIX))
        .map(str::to_owned);
    let volume_name = existing
        .clone()
        .unwrap_or_else(|| format!("{TOKEN_VOLUME_PREFIX}{suffix}"));
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            if mounts.is_null() {
                *mounts = json!([]);
            }
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            let taken = mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH));
            if !taken {
                mounts.push(mount.clone());
                needed = true;
            }
        }
    }
    if existing.is_none() && needed {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if volumes.is_null() {
            *volumes = json!([]);
        }
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(json!({"name": volume_name, "projected": token_volume_source()}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"spec": {
            "initContainers": [{"name": "copy"}],
            "containers": [
                {"name": "main", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "own", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "mine", "emptyDir": {}}]
        }})
    }

    #[test]
    fn every_container_without_a_mount_there_gets_the_token_volume() {
        let mut pod = pod();
        mount_token(&mut pod, "abcde");
        let mounts = |pointer: &str| pod.pointer(pointer).cloned().unwrap_or_default();
        let token = json!({"name": "kube-api-access-abcde", "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        assert_eq!(
            mounts("/spec/initContainers/0/volumeMounts"),
            json!([token])
        );
        assert_eq!(mounts("/spec/containers/0/volumeMounts/1"), token);
        assert_eq!(
            mounts("/spec/containers/1/volumeMounts"),
            json!([{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]),
            "a container's own mount at the token path wins"
        );
        let volumes = mounts("/spec/volumes");
        assert_eq!(volumes.as_array().map(Vec::len), Some(3));
        assert_eq!(volumes[2]["projected"]["defaultMode"], 420);
        assert_eq!(
            volumes[2]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
    }

    #[test]
    fn an_existing_token_volume_is_reused_and_not_duplicated() {
        let mut pod = pod();
        mount_token(&mut pod, "abcde");
        let once = pod.clone();
        mount_token(&mut pod, "zzzzz");
        assert_eq!(pod, once);
    }

    #[test]
    fn automount_is_the_pods_setting_then_the_accounts() {
        let off = json!({"automountServiceAccountToken": false});
        let on = json!({"automountServiceAccountToken": true});
        let unset = json!({});
        let pod =
            |setting: Option<bool>| json!({"spec": {"automountServiceAccountToken": setting}});
        assert!(should_automount(&pod(None), &unset));
        assert!(!should_automount(&pod(None), &off));
        assert!(should_automount(&pod(Some(true)), &off));
        assert!(!should_automount(&pod(Some(false)), &on));
    }
}
