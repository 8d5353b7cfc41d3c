//! The validating admission webhook the operator serves: the API server
//! sends it every create and update of a PostgresCluster, and it refuses
//! what the controller would refuse ([`review`]), so a bad value is
//! refused by `kubectl apply` naming the field and the rule instead of
//! surfacing later as an `InvalidSpec` condition. The CRD's schema and
//! CEL rules still refuse the cheap structural mistakes on a cluster
//! where the webhook is not running.
//!
//! Every replica serves it ([`serve`]), leader or not, with the
//! certificate it keeps in a Secret of the operator's namespace and whose
//! authority it injects into the ValidatingWebhookConfiguration
//! ([`certify`], [`certificate`]).

pub mod certificate;
pub mod certify;
pub mod review;
pub mod serve;

use std::net::SocketAddr;

pub use certify::Registration;

/// Port the webhook listens on in the installed Deployment.
pub const PORT: i32 = 9443;
/// The ValidatingWebhookConfiguration and its Service.
pub const CONFIGURATION: &str = "tusk-operator";
pub const SERVICE: &str = "tusk-operator-webhook";
/// The webhook's name within the configuration (kube-apiserver names it
/// in its errors).
pub const WEBHOOK_NAME: &str = "postgresclusters.postgres.tusk.dev";

/// Where to serve the webhook and how it is registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookSettings {
    pub address: SocketAddr,
    pub registration: Registration,
}
