//! The files the kubelet writes for a pod's volumes: who owns them, and
//! the files a key-value source (a Secret or ConfigMap) becomes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::KeyToPath;

/// Who should own what a pod writes (when the sandbox runs as root).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOwner {
    pub uid: u32,
    pub gid: u32,
}

/// The files of a secret or configMap volume: every key, or the listed
/// items under their paths.
pub fn key_files(
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: u32,
) -> Vec<(String, Vec<u8>, u32)> {
    match items {
        Some(items) => items
            .iter()
            .filter_map(|item| {
                let content = data.get(&item.key)?.clone();
                let mode = item.mode.map_or(default_mode, |m| m as u32);
                Some((item.path.clone(), content, mode))
            })
            .collect(),
        None => data
            .iter()
            .map(|(key, content)| (key.clone(), content.clone(), default_mode))
            .collect(),
    }
}
