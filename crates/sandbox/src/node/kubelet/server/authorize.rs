//! Who may use the kubelet's endpoint, when it serves HTTPS to a real
//! control plane: as a kubelet in webhook authorization mode does, it asks
//! the API server with a SubjectAccessReview whether the user its client
//! certificate names may act on the node's `proxy` subresource (`get` for
//! logs, `create` for exec and faults). kube-apiserver's own kubelet
//! client is allowed; any other certificate of the same CA is allowed only
//! what RBAC grants its user. Answers are remembered a short while (5
//! minutes when allowed, 30 s when not, the kubelet's defaults), so a burst
//! of log reads costs one review.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use crate::https::PeerIdentity;

/// How long an answer holds.
const ALLOWED_FOR: Duration = Duration::from_secs(300);
const DENIED_FOR: Duration = Duration::from_secs(30);

/// What a caller asks to do on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Read a container's log (`get nodes/proxy`).
    ReadLogs,
    /// Run a command in a container, or inject a fault (`create nodes/proxy`).
    Run,
}

impl Action {
    pub fn verb(self) -> &'static str {
        match self {
            Action::ReadLogs => "get",
            Action::Run => "create",
        }
    }
}

type Key = (String, Vec<String>, Action);

/// Asks the API server, and remembers its answers.
pub struct Authorizer {
    client: kube::Client,
    node: String,
    answers: Mutex<HashMap<Key, (bool, Instant)>>,
}

impl Authorizer {
    pub fn new(client: kube::Client, node: String) -> Self {
        Authorizer {
            client,
            node,
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `peer` may do `action` on this node; an API server that
    /// cannot answer is a refusal.
    pub async fn allows(&self, peer: &PeerIdentity, action: Action) -> bool {
        let key = (peer.user.clone(), peer.groups.clone(), action);
        if let Some(allowed) = self.remembered(&key) {
            return allowed;
        }
        let allowed = match self.review(peer, action).await {
            Ok(allowed) => allowed,
            Err(error) => {
                tracing::warn!(%error, user = %peer.user, "a SubjectAccessReview failed: refused");
                return false;
            }
        };
        if let Ok(mut answers) = self.answers.lock() {
            answers.insert(key, (allowed, Instant::now()));
        }
        allowed
    }

    fn remembered(&self, key: &Key) -> Option<bool> {
        let answers = self.answers.lock().ok()?;
        let (allowed, at) = answers.get(key)?;
        let holds = if *allowed { ALLOWED_FOR } else { DENIED_FOR };
        (at.elapsed() < holds).then_some(*allowed)
    }

    async fn review(&self, peer: &PeerIdentity, action: Action) -> Result<bool, kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(peer.user.clone()),
                groups: Some(peer.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(action.verb().to_owned()),
                    resource: Some("nodes".to_owned()),
                    subresource: Some("proxy".to_owned()),
                    name: Some(self.node.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        Ok(answered.status.is_some_and(|s| s.allowed))
    }
}
