//! The password Secrets of declared login roles that name none
//! (`<cluster>-role-<name>`): created once with a generated password and
//! never regenerated, as the cluster's own credentials. A Secret of that
//! name someone else made is left as it is: the role's password is then
//! the one it holds (the instance reads its `password` key), and the
//! operator says so in its log.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use rand::distr::{Alphanumeric, SampleString};
use tusk_api::v1alpha1::generated_secret_name;

use super::secrets::made_for;
use crate::apply::{Applied, create_once};
use crate::builders;
use crate::children::{Children, named};
use crate::context::Context;
use crate::error::Error;
use crate::validate::ValidatedCluster;

/// Creates each generated role Secret that does not exist yet.
pub async fn ensure(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for role in builders::generated_roles(valid) {
        let name = generated_secret_name(valid.name.as_str(), &role.name);
        match named(&children.secrets, &name) {
            Some(live) if made_for(live, valid) => {}
            Some(_) => {
                tracing::warn!(secret = %name, role = %role.name, "a role's password Secret exists that Tusk did not make: its password is used");
            }
            None => {
                let password = Alphanumeric.sample_string(&mut rand::rng(), 32);
                let desired = builders::role_secret(valid, role, &password);
                if create_once(&secrets, None, &desired).await? == Applied::Created {
                    tracing::info!(secret = %name, role = %role.name, "role password Secret created");
                }
            }
        }
    }
    Ok(())
}
