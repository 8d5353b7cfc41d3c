//! The cluster's certificate Secrets ([`crate::builders::certificates`]):
//! what each needs ([`needs`], pure, part of the pass's plan, which `tusk
//! plan` shows too) and carrying it out ([`ensure`]), right after the
//! credentials and before any pod, which mounts two of them.
//!
//! The authority is made once and kept; its key is read from the cache
//! (the one Secret whose data the cache keeps: `children::Trim for
//! Secret`). A certificate Secret that Tusk did not make for this cluster
//! is refused, as a credentials Secret is.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tusk_api::contract::TlsSecret;

use super::secrets::{cached_soon, foreign_secret, made_for};
use crate::apply::{Applied, apply as apply_one, create_once};
use crate::builders::certificates::{Authority, authority_of, certificate_secret, is_current};
use crate::children::{Children, named};
use crate::context::Context;
use crate::error::Error;
use crate::note::Note;
use crate::validate::ValidatedCluster;

/// What one certificate Secret needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Current,
    Create,
    /// Issued again: due, or from another authority.
    Renew,
    /// Not made by Tusk for this cluster: the pass fails.
    Foreign,
}

/// The authority the cluster's certificates come from: the one kept, or
/// `None` when a new one is to be made (none kept yet).
fn kept_authority(
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<Option<Authority>, Error> {
    let name = TlsSecret::CaKey.secret_name(valid);
    match named(&children.secrets, &name) {
        None => Ok(None),
        Some(live) if made_for(live, valid) => Authority::from_secret(live)
            .map(Some)
            .map_err(|error| Error::SecretConflict(error.to_string())),
        Some(_) => Err(foreign_secret(valid, &name, "carries the cluster's label")),
    }
}

/// What each certificate Secret needs at `now`. They are to come from the
/// authority kept in `<cluster>-ca-key`, known by the id it is annotated
/// with (its key is not needed to judge, so `tusk plan`, which reads
/// Secrets without their data, judges as the operator does); without one
/// a new authority is made and every Secret anew.
pub fn needs(
    valid: &ValidatedCluster,
    children: &Children,
    now: Timestamp,
) -> Vec<(TlsSecret, Need)> {
    let kept = named(&children.secrets, &TlsSecret::CaKey.secret_name(valid))
        .filter(|live| made_for(live, valid))
        .and_then(authority_of);
    TlsSecret::ALL
        .iter()
        .map(|&which| {
            let need = match (named(&children.secrets, &which.secret_name(valid)), kept) {
                (None, _) => Need::Create,
                (Some(live), _) if !made_for(live, valid) => Need::Foreign,
                (Some(live), Some(authority)) if is_current(live, authority, now) => Need::Current,
                (Some(_), _) => Need::Renew,
            };
            (which, need)
        })
        .collect()
}

/// The events for what `needs` says: a certificate issued again is news
/// (its pods reload it within about a minute); a new cluster's first
/// certificates are not.
pub fn notes(valid: &ValidatedCluster, needs: &[(TlsSecret, Need)]) -> Vec<Note> {
    needs
        .iter()
        .filter(|(_, need)| *need == Need::Renew)
        .map(|(which, _)| {
            Note::normal(
                "CertificateIssued",
                format!(
                    "Secret {} issued again (due for renewal, or from another authority); the instances reload it",
                    which.secret_name(valid)
                ),
            )
        })
        .collect()
}

/// Makes, renews or refuses the certificate Secrets as the plan's
/// [`needs`] say.
pub async fn ensure(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    needs: &[(TlsSecret, Need)],
) -> Result<(), Error> {
    let now = Timestamp::now();
    let kept = kept_authority(valid, children)?;
    let authority = match &kept {
        Some(authority) => authority.clone(),
        None => {
            Authority::generate(valid, now).map_err(|error| Error::Refused(error.to_string()))?
        }
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for &(which, need) in needs {
        let name = which.secret_name(valid);
        let desired = || {
            certificate_secret(valid, which, &authority, now)
                .map_err(|error| Error::Refused(error.to_string()))
        };
        match need {
            Need::Current => {}
            Need::Foreign => {
                return Err(foreign_secret(valid, &name, "carries the cluster's label"));
            }
            Need::Create => {
                if create_once(&secrets, None, &desired()?).await? == Applied::Existing {
                    if !cached_soon(ctx, valid, &name).await {
                        return Err(foreign_secret(valid, &name, "exists"));
                    }
                    if which == TlsSecret::CaKey {
                        // Made by an earlier pass, not cached yet: the
                        // next pass issues from the authority it holds.
                        return Ok(());
                    }
                }
            }
            Need::Renew => {
                apply_one(&secrets, None, &desired()?).await?;
                tracing::info!(secret = %name, "certificate issued again");
            }
        }
    }
    Ok(())
}
