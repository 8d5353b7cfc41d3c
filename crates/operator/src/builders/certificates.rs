//! The cluster's certificates: an authority of its own (`<cluster>-ca-key`,
//! read by the operator alone), its certificate for clients
//! (`<cluster>-ca`), PostgreSQL's server certificate for the names of the
//! cluster's Services (`<cluster>-server`), the replication user's client
//! certificate (`<cluster>-replication-cert`), the backup client's, the one
//! identity pgBackRest's TLS server admits (`<cluster>-backup-client-cert`),
//! and the key that signs the instance API's tokens, no certificate
//! (`<cluster>-api-token-key`, [`TokenKey`]). See
//! [`tusk_api::contract::TlsSecret`].
//!
//! Every Secret records the authority it belongs to
//! ([`AUTHORITY_ANNOTATION`]): a certificate of another authority (the
//! authority's Secret was deleted and made again) is issued again. A leaf
//! records when it is due ([`RENEW_AFTER_ANNOTATION`]): two thirds into its
//! life it is issued again, and the instances reload it with no restart.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp, tz::TimeZone};
use rand::distr::{Alphanumeric, SampleString};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use tusk_api::contract::{
    CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY, TOKEN_PUBLIC_KEY, TlsSecret, server_certificate_names,
};

use super::child_meta;
use crate::validate::ValidatedCluster;

/// Which authority a certificate Secret belongs to.
pub const AUTHORITY_ANNOTATION: &str = "postgres.tusk.dev/authority";
/// When a leaf certificate is issued again (RFC 3339).
pub const RENEW_AFTER_ANNOTATION: &str = "postgres.tusk.dev/renew-after";
/// The instance pods' addresses the server certificate names, as
/// [`address_list`] writes them.
pub const ADDRESSES_ANNOTATION: &str = "postgres.tusk.dev/addresses";

/// How long the authority is valid.
const AUTHORITY_DAYS: i64 = 3650;
/// How long a server or client certificate is valid; it is issued again
/// after two thirds of it.
const LEAF_DAYS: i64 = 90;
const LEAF_RENEW_AFTER_DAYS: i64 = 60;

/// A certificate that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot sign a token for the instance API: {0}")]
    Token(#[from] jsonwebtoken::errors::Error),
    #[error("Secret {0} holds no token key ({TLS_KEY_KEY}): delete it and Tusk makes a new one")]
    NoTokenKey(String),
    #[error(
        "Secret {0} holds no public key ({TOKEN_PUBLIC_KEY}): delete it and Tusk makes a new token key"
    )]
    NoTokenPublicKey(String),
    #[error("Secret {0} is copied from the token key's Secret, not issued")]
    CopiedFromTokenKey(String),
    #[error(
        "Secret {0} does not hold this cluster's certificate authority (its {TLS_CERT_KEY}, its {TLS_KEY_KEY} and the annotation {AUTHORITY_ANNOTATION}): it was edited; restore it, or delete it and Tusk makes a new authority and issues every certificate again"
    )]
    Unreadable(String),
}

/// The cluster's certificate authority.
#[derive(Clone)]
pub struct Authority {
    /// Names it in the Secrets it issued.
    pub id: String,
    pub cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Authority({})", self.id)
    }
}

/// The authority's subject and constraints: the same every time for a
/// cluster, so its name and key are all an issuer needs.
fn authority_params(cluster: &ValidatedCluster) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(
        DnType::CommonName,
        format!(
            "{}/{} certificate authority",
            cluster.namespace, cluster.name
        ),
    );
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Tusk");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// `days` from `now`, to the day (and the day before `now`, which a
/// clock slightly behind still accepts).
fn validity(params: &mut CertificateParams, now: Timestamp, days: i64) {
    let day = |at: Timestamp| {
        let date = at.to_zoned(TimeZone::UTC).date();
        // A calendar date jiff made is a valid one.
        rcgen::date_time_ymd(
            i32::from(date.year()),
            date.month().unsigned_abs(),
            date.day().unsigned_abs(),
        )
    };
    let from = now
        .saturating_sub(SignedDuration::from_hours(24))
        .unwrap_or(now);
    let to = now
        .saturating_add(SignedDuration::from_hours(24 * days))
        .unwrap_or(now);
    params.not_before = day(from);
    params.not_after = day(to);
}

impl Authority {
    /// A new authority for `cluster`.
    pub fn generate(cluster: &ValidatedCluster, now: Timestamp) -> Result<Self, CertificateError> {
        let key = KeyPair::generate()?;
        let mut params = authority_params(cluster)?;
        validity(&mut params, now, AUTHORITY_DAYS);
        let cert = params.self_signed(&key)?;
        Ok(Authority {
            id: Alphanumeric.sample_string(&mut rand::rng(), 16),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The authority kept in `secret` (`<cluster>-ca-key`, as the cache
    /// holds it: see `children::Trim for Secret`).
    pub fn from_secret(secret: &Secret) -> Result<Self, CertificateError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let data = secret.data.as_ref();
        let text = |key: &str| {
            data.and_then(|d| d.get(key))
                .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
        };
        let id = authority_of(secret).map(str::to_owned);
        match (id, text(TLS_CERT_KEY), text(TLS_KEY_KEY)) {
            (Some(id), Some(cert_pem), Some(key_pem)) => Ok(Authority {
                id,
                cert_pem,
                key_pem,
            }),
            _ => Err(CertificateError::Unreadable(name)),
        }
    }

    /// A token for `/status` signed with the authority's key, which only
    /// pods made before the token key existed accept
    /// ([`TokenKey::sign_token`] for the others).
    pub fn sign_legacy_token(
        &self,
        subject: &str,
        namespace: &str,
        cluster: &str,
        now: u64,
    ) -> Result<String, CertificateError> {
        sign(&self.key_pem, subject, namespace, cluster, now)
    }

    /// A certificate for `leaf` signed by this authority (PEM: certificate,
    /// key); a server certificate names `addresses` too (the instance
    /// pods': a standby's pgBackRest verifies its primary's by the pod
    /// address it connects to).
    fn issue(
        &self,
        cluster: &ValidatedCluster,
        leaf: TlsSecret,
        now: Timestamp,
        addresses: &[IpAddr],
    ) -> Result<(String, String), CertificateError> {
        let issuer = Issuer::new(
            authority_params(cluster)?,
            KeyPair::from_pem(&self.key_pem)?,
        );
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        validity(&mut params, now, LEAF_DAYS);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        match leaf {
            TlsSecret::Replication | TlsSecret::BackupClient => {
                // PostgreSQL's `cert` method logs in the user the common
                // name names; pgBackRest's server admits the backup
                // client's name alone, which no role has.
                let name = if leaf == TlsSecret::Replication {
                    tusk_postgres::roles::REPLICATION
                } else {
                    tusk_postgres::pgbackrest::BACKUP_CLIENT
                };
                params.distinguished_name.push(DnType::CommonName, name);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
            _ => {
                let names = server_certificate_names(cluster.name.as_str(), &cluster.namespace);
                if let Some(first) = names.first() {
                    params
                        .distinguished_name
                        .push(DnType::CommonName, first.clone());
                }
                for name in names {
                    params
                        .subject_alt_names
                        .push(SanType::DnsName(name.try_into()?));
                }
                params
                    .subject_alt_names
                    .extend(addresses.iter().copied().map(SanType::IpAddress));
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            }
        }
        let cert = params.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// A token for the instances' `/status` of the cluster `cluster` in
/// `namespace`, signed with `key_pem` for `subject` at `now` (seconds
/// since the epoch); see `tusk_api::instance::TOKEN_HEADER`.
fn sign(
    key_pem: &str,
    subject: &str,
    namespace: &str,
    cluster: &str,
    now: u64,
) -> Result<String, CertificateError> {
    let claims = tusk_api::instance::TokenClaims::new(subject, namespace, cluster, now);
    let key = jsonwebtoken::EncodingKey::from_ec_pem(key_pem.as_bytes())?;
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    Ok(jsonwebtoken::encode(&header, &claims, &key)?)
}

/// The key that signs the instance API's tokens (`<cluster>-api-token-key`):
/// an ES256 key of its own, not the authority's, so that whoever reads
/// instance reports (the operator, `tusk plan`) needs no key that issues
/// certificates. Instances mount its public half.
#[derive(Clone)]
pub struct TokenKey {
    key_pem: String,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(<key>)")
    }
}

impl TokenKey {
    /// The key kept in `secret`.
    pub fn from_secret(secret: &Secret) -> Result<Self, CertificateError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(TLS_KEY_KEY))
            .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
            .map(|key_pem| TokenKey { key_pem })
            .ok_or(CertificateError::NoTokenKey(name))
    }

    /// A token for `/status` of `cluster` in `namespace`, for `subject` at
    /// `now` (seconds since the epoch).
    pub fn sign_token(
        &self,
        subject: &str,
        namespace: &str,
        cluster: &str,
        now: u64,
    ) -> Result<String, CertificateError> {
        sign(&self.key_pem, subject, namespace, cluster, now)
    }
}

/// A new token key: its private and public halves (PEM).
fn token_key() -> Result<(String, String), CertificateError> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// The authority `secret` says it belongs to.
pub fn authority_of(secret: &Secret) -> Option<&str> {
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(AUTHORITY_ANNOTATION)
        .map(String::as_str)
}

/// The addresses a server certificate Secret says it names.
pub fn addresses_of(secret: &Secret) -> &str {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ADDRESSES_ANNOTATION))
        .map_or("", String::as_str)
}

/// `addresses` as [`ADDRESSES_ANNOTATION`] records them: sorted, each
/// once, separated by commas.
pub fn address_list(addresses: &[IpAddr]) -> String {
    let sorted: std::collections::BTreeSet<&IpAddr> = addresses.iter().collect();
    sorted
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `secret` belongs to the authority `authority` (its id) and is
/// not yet due at `now`.
pub fn is_current(secret: &Secret, authority: &str, now: Timestamp) -> bool {
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let ours = authority_of(secret) == Some(authority);
    let due = annotations
        .get(RENEW_AFTER_ANNOTATION)
        .and_then(|at| at.parse::<Timestamp>().ok())
        .is_some_and(|at| now >= at);
    ours && !due
}

/// The Secret `which` of `cluster` from `authority`, a leaf freshly
/// issued (the server's naming `addresses`).
pub fn certificate_secret(
    cluster: &ValidatedCluster,
    which: TlsSecret,
    authority: &Authority,
    now: Timestamp,
    addresses: &[IpAddr],
) -> Result<Secret, CertificateError> {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    let mut annotations = BTreeMap::from([(AUTHORITY_ANNOTATION.to_owned(), authority.id.clone())]);
    let (type_, data) = match which {
        TlsSecret::Ca => (
            "Opaque",
            BTreeMap::from([(CA_KEY, bytes(&authority.cert_pem))]),
        ),
        TlsSecret::CaKey => (
            "kubernetes.io/tls",
            BTreeMap::from([
                (TLS_CERT_KEY, bytes(&authority.cert_pem)),
                (TLS_KEY_KEY, bytes(&authority.key_pem)),
            ]),
        ),
        TlsSecret::TokenKey => {
            let (private, public) = token_key()?;
            (
                "Opaque",
                BTreeMap::from([
                    (TLS_KEY_KEY, bytes(&private)),
                    (TOKEN_PUBLIC_KEY, bytes(&public)),
                ]),
            )
        }
        TlsSecret::TokenPublicKey => {
            return Err(CertificateError::CopiedFromTokenKey(
                which.secret_name(cluster),
            ));
        }
        TlsSecret::Server | TlsSecret::Replication | TlsSecret::BackupClient => {
            let (cert, key) = authority.issue(cluster, which, now, addresses)?;
            if which == TlsSecret::Server {
                annotations.insert(ADDRESSES_ANNOTATION.to_owned(), address_list(addresses));
            }
            let renew = now
                .saturating_add(SignedDuration::from_hours(24 * LEAF_RENEW_AFTER_DAYS))
                .unwrap_or(now);
            annotations.insert(RENEW_AFTER_ANNOTATION.to_owned(), renew.to_string());
            (
                "kubernetes.io/tls",
                BTreeMap::from([
                    (TLS_CERT_KEY, bytes(&cert)),
                    (TLS_KEY_KEY, bytes(&key)),
                    (CA_KEY, bytes(&authority.cert_pem)),
                ]),
            )
        }
    };
    let mut metadata = child_meta(cluster, &which.secret_name(cluster));
    metadata.annotations = Some(annotations);
    Ok(Secret {
        metadata,
        type_: Some(type_.to_owned()),
        data: Some(
            data.into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        ),
        ..Secret::default()
    })
}

/// The public half a token key Secret (or its copy) holds.
pub fn public_half(secret: &Secret) -> Option<&ByteString> {
    secret.data.as_ref()?.get(TOKEN_PUBLIC_KEY)
}

/// `<cluster>-api-token-pub`: the public half of the token key in
/// `token_key`, alone, under the same authority's annotation. Instances
/// mount it (a node may read every Secret its pods mount, so none mounts
/// the private half's).
pub fn token_public_secret(
    cluster: &ValidatedCluster,
    token_key: &Secret,
) -> Result<Secret, CertificateError> {
    let public = public_half(token_key).cloned().ok_or_else(|| {
        CertificateError::NoTokenPublicKey(token_key.metadata.name.clone().unwrap_or_default())
    })?;
    let mut metadata = child_meta(cluster, &TlsSecret::TokenPublicKey.secret_name(cluster));
    metadata.annotations = authority_of(token_key)
        .map(|id| BTreeMap::from([(AUTHORITY_ANNOTATION.to_owned(), id.to_owned())]));
    Ok(Secret {
        metadata,
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(TOKEN_PUBLIC_KEY.to_owned(), public)])),
        ..Secret::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    fn cluster() -> ValidatedCluster {
        validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}
        }))
    }

    fn now() -> Timestamp {
        "2026-12-05T12:00:00Z".parse().expect("time")
    }

    fn text(secret: &Secret, key: &str) -> String {
        let data = secret.data.as_ref().expect("data");
        String::from_utf8(data[key].0.clone()).expect("UTF-8")
    }

    /// The issued chain is one rustls accepts for the Services' names, and
    /// the client certificate names the replication user.
    #[test]
    fn the_server_certificate_verifies_for_every_service_name_against_the_cluster_authority() {
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let cluster = cluster();
        let authority = Authority::generate(&cluster, now()).expect("authority");
        let address: IpAddr = "10.0.0.7".parse().expect("an address");
        let server = certificate_secret(&cluster, TlsSecret::Server, &authority, now(), &[address])
            .expect("server");
        assert_eq!(addresses_of(&server), "10.0.0.7");
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(authority.cert_pem.as_bytes()).expect("ca"))
            .expect("root");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider,
        )
        .build()
        .expect("verifier");
        let cert =
            CertificateDer::from_pem_slice(text(&server, TLS_CERT_KEY).as_bytes()).expect("cert");
        let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            u64::try_from(now().as_second()).expect("after 1970"),
        ));
        for name in [
            "orders-rw",
            "orders-ro.shop.svc",
            "orders-r.shop.svc.cluster.local",
        ] {
            let name = ServerName::try_from(name).expect("name");
            verifier
                .verify_server_cert(&cert, &[], &name, &[], at)
                .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
        // The instance pod's address too (pgBackRest connects by it).
        verifier
            .verify_server_cert(&cert, &[], &ServerName::IpAddress(address.into()), &[], at)
            .expect("the pod's address");
        let elsewhere: IpAddr = "10.0.0.8".parse().expect("an address");
        for other in [
            ServerName::try_from("other-rw").expect("name"),
            ServerName::IpAddress(elsewhere.into()),
        ] {
            assert!(
                verifier
                    .verify_server_cert(&cert, &[], &other, &[], at)
                    .is_err(),
                "{other:?}"
            );
        }
        // Another cluster's authority does not vouch for it.
        let foreign = Authority::generate(&cluster, now()).expect("authority");
        assert_ne!(foreign.cert_pem, authority.cert_pem);
        assert_eq!(text(&server, CA_KEY), authority.cert_pem);
        assert_eq!(server.type_.as_deref(), Some("kubernetes.io/tls"));
    }

    #[test]
    fn only_the_key_secret_holds_the_authority_key_and_it_reads_back() {
        let cluster = cluster();
        let authority = Authority::generate(&cluster, now()).expect("authority");
        let public =
            certificate_secret(&cluster, TlsSecret::Ca, &authority, now(), &[]).expect("ca");
        assert_eq!(public.metadata.name.as_deref(), Some("orders-ca"));
        assert_eq!(
            public
                .data
                .as_ref()
                .map(|d| d.keys().cloned().collect::<Vec<_>>()),
            Some(vec![CA_KEY.to_owned()])
        );
        let private =
            certificate_secret(&cluster, TlsSecret::CaKey, &authority, now(), &[]).expect("key");
        let read = Authority::from_secret(&private).expect("reads back");
        assert_eq!(read.id, authority.id);
        assert_eq!(read.cert_pem, authority.cert_pem);
        let mut emptied = private.clone();
        emptied.data = None;
        assert_eq!(
            Authority::from_secret(&emptied).map(|a| a.id).map_err(|e| e.to_string()),
            Err("Secret orders-ca-key does not hold this cluster's certificate authority (its tls.crt, its tls.key and the annotation postgres.tusk.dev/authority): it was edited; restore it, or delete it and Tusk makes a new authority and issues every certificate again".to_owned())
        );
    }

    #[test]
    fn a_leaf_is_issued_again_when_due_or_from_another_authority() {
        let cluster = cluster();
        let authority = Authority::generate(&cluster, now()).expect("authority");
        let leaf = certificate_secret(&cluster, TlsSecret::Replication, &authority, now(), &[])
            .expect("leaf");
        assert!(is_current(&leaf, &authority.id, now()));
        let later = |days: i64| {
            now()
                .saturating_add(SignedDuration::from_hours(24 * days))
                .expect("time")
        };
        assert!(is_current(&leaf, &authority.id, later(59)));
        assert!(!is_current(&leaf, &authority.id, later(60)));
        let other = Authority::generate(&cluster, now()).expect("authority");
        assert!(!is_current(&leaf, &other.id, now()));
    }
}

#[cfg(test)]
mod identity_tests {
    use super::*;
    use crate::builders::validated;

    fn cluster() -> ValidatedCluster {
        validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}
        }))
    }

    /// Whether the certificate in `secret` carries `name` (its subject's
    /// common name: the issuer's is the authority's, which is neither).
    fn names(secret: &Secret, name: &str) -> bool {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let pem = &secret.data.as_ref().expect("data")[TLS_CERT_KEY].0;
        let der = CertificateDer::from_pem_slice(pem).expect("a certificate");
        der.windows(name.len()).any(|w| w == name.as_bytes())
    }

    /// pgBackRest's server admits one name; only the backup client's
    /// certificate carries it, not the replication user's.
    #[test]
    fn the_backup_client_has_an_identity_of_its_own() {
        let cluster = cluster();
        let now: Timestamp = "2026-12-05T12:00:00Z".parse().expect("time");
        let authority = Authority::generate(&cluster, now).expect("authority");
        let issue =
            |which| certificate_secret(&cluster, which, &authority, now, &[]).expect("issued");
        let (backup, replication) = (
            issue(TlsSecret::BackupClient),
            issue(TlsSecret::Replication),
        );
        let (backup_name, replication_name) = (
            tusk_postgres::pgbackrest::BACKUP_CLIENT,
            tusk_postgres::roles::REPLICATION,
        );
        assert!(names(&backup, backup_name) && !names(&backup, replication_name));
        assert!(names(&replication, replication_name) && !names(&replication, backup_name));
    }

    /// The token key is not the authority's: a token it signs checks with
    /// its public half, which is all an instance mounts, and not with the
    /// authority's certificate.
    #[test]
    fn tokens_are_signed_by_a_key_of_their_own() {
        let cluster = cluster();
        let now: Timestamp = "2026-12-05T12:00:00Z".parse().expect("time");
        let authority = Authority::generate(&cluster, now).expect("authority");
        let secret =
            certificate_secret(&cluster, TlsSecret::TokenKey, &authority, now, &[]).expect("made");
        let data = secret.data.as_ref().expect("data");
        let public = String::from_utf8(data[TOKEN_PUBLIC_KEY].0.clone()).expect("PEM");
        let token = TokenKey::from_secret(&secret)
            .expect("reads")
            .sign_token("t", "shop", "orders", 1_000)
            .expect("signed");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.validate_exp = false;
        validation.set_audience(&[tusk_api::instance::token_audience("shop", "orders")]);
        let check = |pem: &str| {
            let key = jsonwebtoken::DecodingKey::from_ec_pem(pem.as_bytes()).expect("a key");
            jsonwebtoken::decode::<tusk_api::instance::TokenClaims>(&token, &key, &validation)
        };
        check(&public).expect("the public half checks it");
        assert!(check(&authority.cert_pem).is_err());
        assert!(!public.contains("PRIVATE"));

        // What instances mount is a Secret of the public half alone.
        let copy = token_public_secret(&cluster, &secret).expect("copied");
        assert_eq!(copy.metadata.name.as_deref(), Some("orders-api-token-pub"));
        let keys: Vec<&String> = copy.data.as_ref().expect("data").keys().collect();
        assert_eq!(keys, [TOKEN_PUBLIC_KEY]);
        let copied = public_half(&copy).expect("the public half").0.clone();
        check(&String::from_utf8(copied).expect("PEM")).expect("the copy checks it");
        assert_eq!(authority_of(&copy), Some(authority.id.as_str()));
        assert!(matches!(
            certificate_secret(&cluster, TlsSecret::TokenPublicKey, &authority, now, &[]),
            Err(CertificateError::CopiedFromTokenKey(_))
        ));
    }
}
