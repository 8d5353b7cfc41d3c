//! Which Secrets of a cluster's names are its own: made by Tusk for this
//! cluster (its owner reference), or one that reaches the cache a moment
//! after an earlier pass made it. A Secret of those names that someone
//! else made is never handed to PostgreSQL ([`foreign_secret`]).

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use crate::context::Context;
use crate::error::Error;
use crate::validate::ValidatedCluster;

/// Whether Tusk created `secret` for this cluster (its owner reference).
pub fn made_for(secret: &Secret, valid: &ValidatedCluster) -> bool {
    secret
        .owner_references()
        .iter()
        .any(|o| o.uid == valid.owner.uid)
}

/// Whether the Secret `name`, made for this cluster, reaches the cache
/// within a second: one created by an earlier pass whose watch event is
/// still on its way. Without `get` on Secrets (the operator never reads
/// them), the cache is the only way to tell.
pub async fn cached_soon(ctx: &Context, valid: &ValidatedCluster, name: &str) -> bool {
    let key = kube::runtime::reflector::ObjectRef::new(name).within(&valid.namespace);
    for _ in 0..10 {
        let ours = ctx
            .stores
            .secrets
            .get(&key)
            .and_then(|packed| packed.unpack().ok())
            .is_some_and(|secret| made_for(&secret, valid));
        if ours {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

/// Why a credentials Secret is refused.
pub fn foreign_secret(valid: &ValidatedCluster, name: &str, found: &str) -> Error {
    Error::SecretConflict(format!(
        "Secret {name} {found} but was not created by Tusk for this cluster (uid {}): \
         Tusk never hands credentials it did not generate to PostgreSQL. \
         Delete or rename the Secret and Tusk generates a new one",
        valid.owner.uid
    ))
}
