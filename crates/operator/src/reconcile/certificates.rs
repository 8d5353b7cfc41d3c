//! The cluster's certificate Secrets ([`crate::builders::certificates`]):
//! what each needs ([`needs`], pure, part of the pass's plan, which `tusk
//! plan` shows too) and carrying it out ([`ensure`]), right after the
//! credentials and before any pod, which mounts two of them.
//!
//! The authority is made once and kept; its key is read from the cache
//! (the one Secret whose data the cache keeps: `children::Trim for
//! Secret`). A certificate Secret that Tusk did not make for this cluster
//! is refused, as a credentials Secret is.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use tusk_api::contract::TlsSecret;
use tusk_api::labels;

use super::secrets::{cached_soon, foreign_secret, made_for};
use crate::apply::{Applied, apply as apply_one, create_once};
use crate::builders::certificates::{
    Authority, address_list, addresses_of, authority_of, certificate_secret, is_current,
    public_half, token_public_secret,
};
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
    /// The server certificate issued again to name the instance pods'
    /// addresses as they are now (a pod made again has a new one).
    Readdress,
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
    let addresses = instance_addresses(children);
    let token_key = named(&children.secrets, &TlsSecret::TokenKey.secret_name(valid));
    TlsSecret::ALL
        .iter()
        .map(|&which| {
            let live = named(&children.secrets, &which.secret_name(valid));
            let need = match (live, kept) {
                (None, _) => Need::Create,
                (Some(live), _) if !made_for(live, valid) => Need::Foreign,
                // A copy of the token key's public half: current while the
                // key is and the copy is the same as the key's (as far as
                // the Secrets' data is at hand: `tusk plan` reads none).
                (Some(live), _) if which == TlsSecret::TokenPublicKey => match (token_key, kept) {
                    (Some(key), Some(authority))
                        if is_current(key, authority, now)
                            && public_half(live) == public_half(key) =>
                    {
                        Need::Current
                    }
                    _ => Need::Renew,
                },
                (Some(live), Some(authority)) if is_current(live, authority, now) => {
                    if which == TlsSecret::Server && addresses_of(live) != address_list(&addresses)
                    {
                        Need::Readdress
                    } else {
                        Need::Current
                    }
                }
                (Some(_), _) => Need::Renew,
            };
            (which, need)
        })
        .collect()
}

/// The addresses of the cluster's instance pods that have one.
pub fn instance_addresses(children: &Children) -> Vec<IpAddr> {
    children
        .pods
        .iter()
        .filter(|pod| pod.labels().contains_key(labels::INSTANCE))
        .filter_map(|pod| pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok())
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
    let addresses = instance_addresses(children);
    // The token key as it will be after this pass, which its public half's
    // copy is made from; `None` when it is not known yet (made by an
    // earlier pass and not cached): the next pass copies it.
    let mut token_key = named(&children.secrets, &TlsSecret::TokenKey.secret_name(valid)).cloned();
    for &(which, need) in needs {
        let name = which.secret_name(valid);
        if need == Need::Foreign {
            return Err(foreign_secret(valid, &name, "carries the cluster's label"));
        }
        if need == Need::Current {
            continue;
        }
        let made = match which {
            TlsSecret::TokenPublicKey => match &token_key {
                Some(key) => token_public_secret(valid, key),
                None => continue,
            },
            _ => certificate_secret(valid, which, &authority, now, &addresses),
        };
        let desired = made.map_err(|error| Error::Refused(error.to_string()))?;
        if need == Need::Create {
            let created = create_once(&secrets, None, &desired).await?;
            if created == Applied::Existing {
                if !cached_soon(ctx, valid, &name).await {
                    return Err(foreign_secret(valid, &name, "exists"));
                }
                if which == TlsSecret::CaKey {
                    // Made by an earlier pass, not cached yet: the
                    // next pass issues from the authority it holds.
                    return Ok(());
                }
            }
            if which == TlsSecret::TokenKey {
                token_key = (created != Applied::Existing).then_some(desired);
            }
            continue;
        }
        apply_one(&secrets, None, &desired).await?;
        if need == Need::Readdress {
            tracing::info!(secret = %name, addresses = %address_list(&addresses), "server certificate issued again for the instances' addresses");
        } else {
            tracing::info!(secret = %name, "certificate issued again");
        }
        if which == TlsSecret::TokenKey {
            token_key = Some(desired);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::config::OperatorConfig;

    fn pod(name: &str, address: &str, instance: bool) -> Pod {
        let labels = if instance {
            serde_json::json!({ labels::INSTANCE: name })
        } else {
            serde_json::json!({})
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"podIP": address},
        }))
        .expect("a pod")
    }

    /// A valid three-instance cluster, a moment, and an authority made then.
    fn three_instances_and_their_authority() -> (ValidatedCluster, Timestamp, Authority) {
        let cluster = crate::validate::tests::cluster(crate::validate::tests::three_instances());
        let valid = crate::validate::validate(&cluster, &OperatorConfig::default()).expect("valid");
        let now: Timestamp = "2026-12-05T12:00:00Z".parse().expect("time");
        let authority = Authority::generate(&valid, now).expect("authority");
        (valid, now, authority)
    }

    /// Every certificate Secret, as a first pass makes them.
    fn issued(
        valid: &ValidatedCluster,
        authority: &Authority,
        now: Timestamp,
        addresses: &[IpAddr],
    ) -> Vec<Secret> {
        let mut secrets: Vec<Secret> = TlsSecret::ALL
            .iter()
            .filter(|&&which| which != TlsSecret::TokenPublicKey)
            .map(|&which| {
                certificate_secret(valid, which, authority, now, addresses).expect("issued")
            })
            .collect();
        let key = named(&secrets, &TlsSecret::TokenKey.secret_name(valid)).expect("the token key");
        secrets.push(token_public_secret(valid, key).expect("copied"));
        secrets
    }

    fn need_of(needs: &[(TlsSecret, Need)], which: TlsSecret) -> Need {
        needs.iter().find(|(w, _)| *w == which).expect("listed").1
    }

    /// The instances check tokens against a copy of the token key's public
    /// half: made after the key, made again whenever the key is (a key
    /// deleted by hand, an authority replaced), and a Secret of another's
    /// refused, as every certificate Secret is.
    #[test]
    fn the_token_keys_public_copy_follows_the_token_key() {
        let (valid, now, authority) = three_instances_and_their_authority();
        let mut children = Children {
            secrets: issued(&valid, &authority, now, &[]),
            ..Children::default()
        };
        let public = TlsSecret::TokenPublicKey.secret_name(&valid);
        let key = TlsSecret::TokenKey.secret_name(&valid);
        assert_eq!(
            need_of(&needs(&valid, &children, now), TlsSecret::TokenPublicKey),
            Need::Current
        );

        // The token key deleted: both made, the copy from the new key.
        children
            .secrets
            .retain(|s| s.metadata.name.as_deref() != Some(key.as_str()));
        let now_needs = needs(&valid, &children, now);
        assert_eq!(need_of(&now_needs, TlsSecret::TokenKey), Need::Create);
        assert_eq!(need_of(&now_needs, TlsSecret::TokenPublicKey), Need::Renew);

        // A new key in place, the copy still the old one's.
        let new_key =
            certificate_secret(&valid, TlsSecret::TokenKey, &authority, now, &[]).expect("made");
        children.secrets.push(new_key);
        assert_eq!(
            need_of(&needs(&valid, &children, now), TlsSecret::TokenPublicKey),
            Need::Renew
        );

        // The copy missing: made.
        children
            .secrets
            .retain(|s| s.metadata.name.as_deref() != Some(public.as_str()));
        assert_eq!(
            need_of(&needs(&valid, &children, now), TlsSecret::TokenPublicKey),
            Need::Create
        );
    }

    /// A standby's pgBackRest verifies its primary by the pod's address:
    /// the server certificate names every instance pod's, and is issued
    /// again when one changes (quietly: no event).
    #[test]
    fn the_server_certificate_is_issued_again_when_an_instance_pods_address_changes() {
        let (valid, now, authority) = three_instances_and_their_authority();
        let mut children = Children {
            pods: vec![
                pod("orders-2", "10.0.0.2", true),
                pod("orders-1", "10.0.0.1", true),
                // A restore rehearsal's pod is not an instance.
                pod("orders-rehearsal", "10.0.0.9", false),
            ],
            ..Children::default()
        };
        let addresses = instance_addresses(&children);
        assert_eq!(address_list(&addresses), "10.0.0.1,10.0.0.2");
        children.secrets = issued(&valid, &authority, now, &addresses);
        let needs_now = needs(&valid, &children, now);
        assert!(
            needs_now.iter().all(|(_, need)| *need == Need::Current),
            "{needs_now:?}"
        );

        children.pods[0] = pod("orders-2", "10.0.0.3", true);
        let needs_now = needs(&valid, &children, now);
        for (which, need) in &needs_now {
            let expected = if *which == TlsSecret::Server {
                Need::Readdress
            } else {
                Need::Current
            };
            assert_eq!(*need, expected, "{which:?}");
        }
        assert!(notes(&valid, &needs_now).is_empty());
    }
}
