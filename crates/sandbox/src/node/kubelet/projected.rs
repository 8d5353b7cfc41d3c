//! Projected volumes: the files of several sources in one directory, as
//! the kubelet writes them (`serviceAccountToken`, `configMap`, `secret`
//! and `downwardAPI` sources; `clusterTrustBundle` and `podCertificate`
//! are not served). The token a `serviceAccountToken` source needs was
//! requested with the pod's other inputs.

use k8s_openapi::api::core::v1::{Pod, ProjectedVolumeSource};

use super::input_error::InputError;
use super::inputs::PodInputs;

/// A file of a volume: relative path, content, mode.
pub type File = (String, Vec<u8>, u32);

/// Why a projected volume cannot be written.
#[derive(Debug)]
pub enum ProjectionError {
    Input(InputError),
    Unsupported(&'static str),
}

impl From<InputError> for ProjectionError {
    fn from(error: InputError) -> Self {
        Self::Input(error)
    }
}

/// The files of projected volume `volume` of `pod`.
pub fn files(
    pod: &Pod,
    volume: &str,
    projected: &ProjectedVolumeSource,
    inputs: &PodInputs,
) -> Result<Vec<File>, ProjectionError> {
    let default_mode = projected.default_mode.map_or(0o644, |m| m as u32);
    let mut files = Vec::new();
    for source in projected.sources.iter().flatten() {
        if let Some(token) = &source.service_account_token {
            let key = (volume.to_owned(), token.path.clone());
            let issued = inputs.tokens.get(&key).ok_or_else(|| InputError::Token {
                account: account(pod),
                message: "no token was issued".into(),
            })?;
            files.push((
                token.path.clone(),
                issued.token.clone().into_bytes(),
                default_mode,
            ));
        } else if let Some(config_map) = &source.config_map {
            let data = inputs.config_map(&config_map.name, config_map.optional.unwrap_or(false))?;
            files.extend(super::files::key_files(
                &data,
                config_map.items.as_ref(),
                default_mode,
            ));
        } else if let Some(secret) = &source.secret {
            let data = inputs.secret(&secret.name, secret.optional.unwrap_or(false))?;
            files.extend(super::files::key_files(
                &data,
                secret.items.as_ref(),
                default_mode,
            ));
        } else if let Some(downward) = &source.downward_api {
            for item in downward.items.iter().flatten() {
                let Some(field) = &item.field_ref else {
                    return Err(ProjectionError::Unsupported("downwardAPI resourceFieldRef"));
                };
                let value = super::env::field_value(pod, &field.field_path)?;
                let mode = item.mode.map_or(default_mode, |m| m as u32);
                files.push((item.path.clone(), value.into_bytes(), mode));
            }
        } else {
            return Err(ProjectionError::Unsupported(
                "projected sources other than serviceAccountToken, configMap, secret and downwardAPI",
            ));
        }
    }
    Ok(files)
}

fn account(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use serde_json::json;

    use super::*;
    use crate::node::kubelet::identity::Token;

    #[test]
    fn every_source_lands_in_the_one_directory() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "shop"},
            "spec": {"containers": [], "volumes": [{"name": "api", "projected": {
                "defaultMode": 0o640,
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"secret": {"name": "creds"}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
                ]}}]}
        }))
        .expect("pod");
        let mut inputs = PodInputs::default();
        inputs.config_maps.insert(
            "kube-root-ca.crt".into(),
            BTreeMap::from([("ca.crt".into(), b"CA".to_vec())]),
        );
        inputs.secrets.insert(
            "creds".into(),
            BTreeMap::from([("password".into(), b"pw".to_vec())]),
        );
        let now = SystemTime::now();
        inputs.tokens.insert(
            ("api".into(), "token".into()),
            Token {
                token: "jwt".into(),
                issued: now,
                expires: now,
            },
        );
        let volume = &pod
            .spec
            .as_ref()
            .expect("spec")
            .volumes
            .as_ref()
            .expect("volumes")[0];
        let projected = volume.projected.as_ref().expect("projected");
        let files = files(&pod, "api", projected, &inputs).expect("files");
        let expected: Vec<File> = vec![
            ("token".into(), b"jwt".to_vec(), 0o640),
            ("ca.crt".into(), b"CA".to_vec(), 0o640),
            ("password".into(), b"pw".to_vec(), 0o640),
            ("namespace".into(), b"shop".to_vec(), 0o640),
        ];
        assert_eq!(files, expected);
        inputs.tokens.clear();
        assert!(matches!(
            super::files(&pod, "api", projected, &inputs),
            Err(ProjectionError::Input(InputError::Token { .. }))
        ));
    }
}
