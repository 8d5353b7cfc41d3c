//! The state every request and every built-in controller reaches: the
//! store, the served kinds, fault injection and the server's identity.
//!
//! It sits below everything else in the API server, so the handlers, the
//! write path and the controllers share it without importing each other.

use std::time::Duration;

use tokio::sync::Notify;

use crate::apiserver::auth::tokens::TokenSigner;
use crate::apiserver::faults::Faults;
use crate::apiserver::resources::Registry;
use crate::apiserver::storage::Store;

/// Settings the handlers read.
pub struct ApiConfig {
    pub bookmark_interval: Duration,
}

/// Everything a request can reach.
pub struct Api {
    pub store: Store,
    pub registry: Registry,
    pub faults: Faults,
    /// The admin bearer token (the kubeconfig's).
    pub token: String,
    /// Signs and checks ServiceAccount tokens.
    pub tokens: TokenSigner,
    pub address: String,
    pub gc_wake: Notify,
    pub config: ApiConfig,
}
