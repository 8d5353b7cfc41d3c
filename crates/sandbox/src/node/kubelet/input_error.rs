//! Why the inputs of a pod (Secrets, ConfigMaps, claims, tokens, field
//! references) cannot be read: one error for every input, so a pod whose
//! inputs are missing waits with one reason.

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    #[error("key {key:?} not found in {kind} {name:?}")]
    KeyNotFound {
        kind: &'static str,
        name: String,
        key: String,
    },
    #[error("persistentvolumeclaim {0:?} not found or not bound yet")]
    ClaimNotBound(String),
    #[error("field {0:?} is not supported by the sandbox")]
    UnsupportedField(String),
    #[error("cannot read from the API server: {0}")]
    Api(#[from] kube::Error),
    #[error("cannot get a token for service account {account:?}: {message}")]
    Token { account: String, message: String },
}
