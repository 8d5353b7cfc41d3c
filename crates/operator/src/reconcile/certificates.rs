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
    TlsSecret::ALL
        .iter()
        .map(|&which| {
            let need = match (named(&children.secrets, &which.secret_name(valid)), kept) {
                (None, _) => Need::Create,
                (Some(live), _) if !made_for(live, valid) => Need::Foreign,
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
    for &(which, need) in needs {
        let name = which.secret_name(valid);
        let desired = || {
            certificate_secret(valid, which, &authority, now, &addresses)
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
            Need::Readdress => {
                apply_one(&secrets, None, &desired()?).await?;
                tracing::info!(secret = %name, addresses = %address_list(&addresses), "server certificate issued again for the instances' addresses");
            }
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

    /// A standby's pgBackRest verifies its primary by the pod's address:
    /// the server certificate names every instance pod's, and is issued
    /// again when one changes (quietly: no event).
    #[test]
    fn the_server_certificate_is_issued_again_when_an_instance_pods_address_changes() {
        let cluster = crate::validate::tests::cluster(crate::validate::tests::three_instances());
        let valid = crate::validate::validate(&cluster, &OperatorConfig::default()).expect("valid");
        let now: Timestamp = "2026-12-05T12:00:00Z".parse().expect("time");
        let authority = Authority::generate(&valid, now).expect("authority");
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
        children.secrets = TlsSecret::ALL
            .iter()
            .map(|&which| {
                certificate_secret(&valid, which, &authority, now, &addresses).expect("issued")
            })
            .collect();
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
