//! The webhook's certificate: an authority of the operator's own and a
//! serving certificate it signed for the webhook Service's names, kept in
//! one Secret in the operator's namespace ([`SECRET`]). Every replica
//! serves the certificate the Secret holds; the authority goes to the
//! `caBundle` of the ValidatingWebhookConfiguration.
//!
//! Renewal: the serving certificate lives [`LEAF_DAYS`] and is issued
//! again, with a new authority, after [`RENEW_AFTER_DAYS`]. The bundle
//! then holds the new authority and the one before it, so a replica still
//! serving the previous certificate (it reads the Secret again within a
//! minute) is trusted meanwhile.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Name of the Secret in the operator's namespace.
pub const SECRET: &str = "tusk-operator-webhook";
/// The serving certificate and its key (the `kubernetes.io/tls` keys).
pub const CERT_KEY: &str = "tls.crt";
pub const KEY_KEY: &str = "tls.key";
/// The authorities to trust, newest first (the `caBundle`).
pub const BUNDLE_KEY: &str = "ca.crt";
/// When the certificate is issued again (RFC 3339).
pub const RENEW_AFTER_ANNOTATION: &str = "postgres.tusk.dev/renew-after";
/// The names the certificate was issued for, comma-separated.
pub const NAMES_ANNOTATION: &str = "postgres.tusk.dev/names";

/// How long a serving certificate (and its authority) is valid.
pub const LEAF_DAYS: i64 = 90;
/// When it is issued again: a month before it expires.
pub const RENEW_AFTER_DAYS: i64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("cannot make the webhook's certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// What the webhook serves and the API server trusts.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    /// The new authority first, then the previous one, if any.
    pub bundle_pem: String,
    pub renew_after: Timestamp,
    pub names: Vec<String>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("renew_after", &self.renew_after)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

/// The names a Service is called by from the API server.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_owned(),
    ]
}

fn validity(params: &mut CertificateParams, now: Timestamp, days: i64) {
    let at = |t: Timestamp| {
        let seconds = t.as_second();
        rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(seconds.unsigned_abs())
    };
    let from = now
        .saturating_sub(SignedDuration::from_hours(1))
        .unwrap_or(now);
    let to = now
        .saturating_add(SignedDuration::from_hours(24 * days))
        .unwrap_or(now);
    params.not_before = at(from);
    params.not_after = at(to);
}

/// A new authority and a serving certificate for `names` (DNS names or IP
/// addresses), valid from `now`; `previous_bundle` is the bundle of the
/// certificate it replaces, whose newest authority stays trusted.
pub fn issue(
    names: &[String],
    now: Timestamp,
    previous_bundle: Option<&str>,
) -> Result<Issued, CertificateError> {
    let authority_key = KeyPair::generate()?;
    let mut authority = CertificateParams::new(Vec::<String>::new())?;
    authority
        .distinguished_name
        .push(DnType::CommonName, "tusk-operator webhook authority");
    authority
        .distinguished_name
        .push(DnType::OrganizationName, "Tusk");
    authority.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    authority.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut authority, now, LEAF_DAYS);
    let authority_cert = authority.self_signed(&authority_key)?;
    let issuer = Issuer::new(authority, authority_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(Vec::<String>::new())?;
    if let Some(first) = names.first() {
        leaf.distinguished_name
            .push(DnType::CommonName, first.clone());
    }
    for name in names {
        leaf.subject_alt_names.push(match name.parse::<IpAddr>() {
            Ok(address) => SanType::IpAddress(address),
            Err(_) => SanType::DnsName(name.clone().try_into()?),
        });
    }
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut leaf, now, LEAF_DAYS);
    let cert = leaf.signed_by(&key, &issuer)?;

    let mut bundle_pem = authority_cert.pem();
    if let Some(previous) = previous_bundle.and_then(first_certificate_pem) {
        bundle_pem.push_str(&previous);
    }
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        bundle_pem,
        renew_after: now
            .saturating_add(SignedDuration::from_hours(24 * RENEW_AFTER_DAYS))
            .unwrap_or(now),
        names: names.to_vec(),
    })
}

/// The first certificate of a PEM bundle, as PEM.
fn first_certificate_pem(bundle: &str) -> Option<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let start = bundle.find("-----BEGIN CERTIFICATE-----")?;
    let end = start + bundle[start..].find(END)? + END.len();
    Some(format!("{}\n", &bundle[start..end]))
}

/// The Secret holding `issued`.
pub fn secret(namespace: &str, issued: &Issued) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    Secret {
        metadata: ObjectMeta {
            name: Some(SECRET.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(crate::install::install_labels()),
            annotations: Some(BTreeMap::from([
                (
                    RENEW_AFTER_ANNOTATION.to_owned(),
                    issued.renew_after.to_string(),
                ),
                (NAMES_ANNOTATION.to_owned(), issued.names.join(",")),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            (CERT_KEY.to_owned(), bytes(&issued.cert_pem)),
            (KEY_KEY.to_owned(), bytes(&issued.key_pem)),
            (BUNDLE_KEY.to_owned(), bytes(&issued.bundle_pem)),
        ])),
        ..Secret::default()
    }
}

/// The certificate `secret` holds, if it holds one for `names` that is not
/// due at `now`.
pub fn current(secret: &Secret, names: &[String], now: Timestamp) -> Option<Issued> {
    let annotations = secret.metadata.annotations.as_ref()?;
    let renew_after: Timestamp = annotations.get(RENEW_AFTER_ANNOTATION)?.parse().ok()?;
    let held: Vec<String> = annotations
        .get(NAMES_ANNOTATION)?
        .split(',')
        .map(str::to_owned)
        .collect();
    if now >= renew_after || held != names {
        return None;
    }
    let data = secret.data.as_ref()?;
    let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
    Some(Issued {
        cert_pem: text(CERT_KEY)?,
        key_pem: text(KEY_KEY)?,
        bundle_pem: text(BUNDLE_KEY)?,
        renew_after,
        names: held,
    })
}

/// The bundle `secret` holds, whatever its state (the authorities a
/// renewal keeps trusting).
pub fn bundle_of(secret: &Secret) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(BUNDLE_KEY)?;
    String::from_utf8(bytes.0.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().expect("a time")
    }

    fn verifies(bundle: &str, cert_pem: &str, name: &str) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        for der in CertificateDer::pem_slice_iter(bundle.as_bytes()).flatten() {
            let _ = roots.add(der);
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let Ok(verifier) = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider,
        )
        .build() else {
            return false;
        };
        let Some(Ok(leaf)) = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).next() else {
            return false;
        };
        let Ok(server) = rustls::pki_types::ServerName::try_from(name.to_owned()) else {
            return false;
        };
        let at = rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            now().as_second().unsigned_abs(),
        ));
        use rustls::client::danger::ServerCertVerifier;
        verifier
            .verify_server_cert(&leaf, &[], &server, &[], at)
            .is_ok()
    }

    #[test]
    fn the_certificate_verifies_for_the_services_names_against_the_bundle() {
        let names = service_names("tusk-operator-webhook", "tusk-system");
        let issued = issue(&names, now(), None).expect("issued");
        for name in &names {
            assert!(
                verifies(&issued.bundle_pem, &issued.cert_pem, name),
                "{name}"
            );
        }
        assert!(!verifies(
            &issued.bundle_pem,
            &issued.cert_pem,
            "elsewhere.svc"
        ));
        let loopback = issue(&["127.0.0.1".to_owned()], now(), None).expect("issued");
        assert!(verifies(
            &loopback.bundle_pem,
            &loopback.cert_pem,
            "127.0.0.1"
        ));
    }

    #[test]
    fn a_renewal_keeps_trusting_the_previous_authority() {
        let names = service_names("w", "ns");
        let first = issue(&names, now(), None).expect("issued");
        let second = issue(&names, now(), Some(&first.bundle_pem)).expect("renewed");
        assert!(verifies(&second.bundle_pem, &first.cert_pem, &names[0]));
        assert!(verifies(&second.bundle_pem, &second.cert_pem, &names[0]));
        let third = issue(&names, now(), Some(&second.bundle_pem)).expect("renewed");
        assert!(
            !verifies(&third.bundle_pem, &first.cert_pem, &names[0]),
            "two back is dropped"
        );
    }

    #[test]
    fn a_certificate_is_due_after_its_renewal_time_or_for_other_names() {
        let names = service_names("w", "ns");
        let issued = issue(&names, now(), None).expect("issued");
        let stored = secret("ns", &issued);
        assert_eq!(current(&stored, &names, now()), Some(issued.clone()));
        let later = now()
            .saturating_add(SignedDuration::from_hours(24 * RENEW_AFTER_DAYS))
            .expect("later");
        assert_eq!(current(&stored, &names, later), None);
        assert_eq!(current(&stored, &service_names("w", "other"), now()), None);
        assert_eq!(current(&Secret::default(), &names, now()), None);
    }
}
