//! Starting and stopping a sandbox's control plane: data directory,
//! credentials, storage, the built-in namespaces, the HTTPS listener on
//! 127.0.0.1, the built-in controllers, and the kubeconfig clients use.
//!
//! This is the one place that assembles the API server and the
//! controllers, so neither imports the other.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::auth::bootstrap::default_policy as bootstrap_policy;
use crate::apiserver::auth::token_request::{self, IssuedToken, TokenOptions};
use crate::apiserver::auth::tokens::{TokenError, TokenSigner};
use crate::apiserver::crds;
use crate::apiserver::error::ApiError;
use crate::apiserver::faults::Faults;
use crate::apiserver::objects::{self, Manage, WriteOptions};
use crate::apiserver::resources::Registry;
use crate::apiserver::server;
use crate::apiserver::state::{Api, ApiConfig};
use crate::apiserver::storage::{ObjectKey, StorageError, Store};
use crate::apiserver::tls::{self, TlsError};
use crate::controllers;
use crate::controllers::{kubernetes_service, root_ca};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Tokens(#[from] TokenError),
    #[error("cannot create the built-in namespaces, RBAC policy and the kubernetes Service: {0}")]
    Bootstrap(ApiError),
}

/// How to run the API server.
#[derive(Clone, Debug)]
pub struct Config {
    pub data_dir: PathBuf,
    /// 0 picks a free port.
    pub port: u16,
    /// How many changes watches can resume from; older versions get 410.
    pub history_limit: usize,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
}

impl Config {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            port: 0,
            history_limit: 50_000,
            bookmark_interval: Duration::from_secs(60),
        }
    }
}

/// A running API server. Dropping it stops the server.
pub struct Sandbox {
    address: SocketAddr,
    kubeconfig: PathBuf,
    faults: Faults,
    api: Arc<Api>,
    tasks: Vec<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

const BUILTIN_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

impl Sandbox {
    pub async fn start(config: Config) -> Result<Self, ServerError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| ServerError::DataDir {
            path: config.data_dir.clone(),
            source,
        })?;
        let tokens = TokenSigner::load_or_create(&config.data_dir)?;
        let store = Store::open(&config.data_dir.join("state.db"), config.history_limit)?;
        let service_ip = kubernetes_service::cluster_ip(&store, &config.data_dir);
        let credentials = tls::load_or_create(&config.data_dir, service_ip)?;
        let registry = Registry::with_builtins();
        let (_, stored_crds) = store.list(crds::RESOURCE_KEY, None)?;
        for crd in stored_crds {
            if let Some(resource) = crds::resource(&crd) {
                registry.insert(resource);
            }
        }
        let listener = TcpListener::bind(("127.0.0.1", config.port))
            .await
            .map_err(|source| ServerError::Bind {
                port: config.port,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| ServerError::Bind {
            port: config.port,
            source,
        })?;
        let faults = Faults::default();
        let api = Arc::new(Api {
            store,
            registry,
            faults: faults.clone(),
            token: credentials.token.clone(),
            tokens,
            address: address.to_string(),
            gc_wake: Notify::new(),
            config: ApiConfig {
                bookmark_interval: config.bookmark_interval,
            },
        });
        bootstrap(&api).map_err(ServerError::Bootstrap)?;
        kubernetes_service::reconcile(&api, service_ip, address.port())
            .map_err(ServerError::Bootstrap)?;
        let kubeconfig = config.data_dir.join("kubeconfig");
        let contents = tls::kubeconfig(
            &format!("https://{address}"),
            &credentials.ca_pem,
            &credentials.token,
        );
        std::fs::write(&kubeconfig, contents).map_err(|source| ServerError::Kubeconfig {
            path: kubeconfig.clone(),
            source,
        })?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let gc = tokio::spawn(controllers::gc::run(api.clone()));
        let root_ca = tokio::spawn(root_ca::run(api.clone(), credentials.ca_pem.clone()));
        let acceptor = TlsAcceptor::from(credentials.server_config);
        let server = tokio::spawn(server::serve(listener, acceptor, api.clone(), shutdown_rx));
        Ok(Self {
            address,
            kubeconfig,
            faults,
            api,
            tasks: vec![gc, root_ca, server],
            shutdown,
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The kubeconfig file kube-rs and kubectl use as it is.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Fault injection and request counts.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// A token for the ServiceAccount `namespace/name`, as TokenRequest
    /// issues it (the ServiceAccount must exist; a bound object must exist
    /// and, for a Pod, run as that ServiceAccount).
    pub fn issue_token(
        &self,
        namespace: &str,
        name: &str,
        options: &TokenOptions,
    ) -> Result<IssuedToken, ApiError> {
        token_request::issue(&self.api, namespace, name, options)
    }

    /// Stops serving: the listener, every connection and the controllers.
    pub fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        self.faults.close_watches();
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The built-in namespaces and the default RBAC policy, where missing.
fn bootstrap(api: &Api) -> Result<(), ApiError> {
    let namespaces = BUILTIN_NAMESPACES.iter().map(|name| {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        ("/namespaces", object)
    });
    let wanted: Vec<_> = namespaces.chain(bootstrap_policy()).collect();
    let options = WriteOptions {
        manage: Manage::Update("tusk-sandbox"),
        user: None,
        dry_run: false,
        validation: FieldValidation::Strict,
    };
    api.store.mutate(|tx| {
        for (key, object) in wanted {
            let Some(resource) = api.registry.by_key(key) else {
                return Err(ApiError::internal(format!("{key} is not registered")));
            };
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if tx.get(&ObjectKey::new(key, "", name)).is_none() {
                objects::create(api, tx, &resource, "v1", None, object, &options)?;
            }
        }
        Ok(())
    })
}
