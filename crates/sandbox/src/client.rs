//! A kube-rs client for a running sandbox, from the kubeconfig it wrote:
//! the one way tests, benchmarks and `tusk sandbox up` connect.

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read the kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("cannot build a client from {path}: {message}")]
    Client { path: String, message: String },
}

/// A client authenticated as the kubeconfig at `path` says.
pub async fn from_kubeconfig(path: &Path) -> Result<Client, ClientError> {
    let shown = path.display().to_string();
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| ClientError::Kubeconfig {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| ClientError::Client {
            path: shown.clone(),
            message: e.to_string(),
        })?;
    Client::try_from(config).map_err(|e| ClientError::Client {
        path: shown,
        message: e.to_string(),
    })
}
