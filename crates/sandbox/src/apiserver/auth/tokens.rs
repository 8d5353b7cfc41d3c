//! ServiceAccount tokens: JWTs signed with an ECDSA P-256 key (ES256)
//! that the sandbox generates on first start and keeps in its data
//! directory, so tokens survive a restart.
//!
//! The claims are kube-apiserver's: `iss`, `sub`
//! (`system:serviceaccount:{ns}:{name}`), `aud`, `exp`, `iat`, `nbf`,
//! `jti`, and `kubernetes.io` with the namespace, the ServiceAccount's name
//! and uid, and the pod or secret the token is bound to. This module signs
//! and checks signatures and times; whether the ServiceAccount (and bound
//! object) still exists is the authenticator's business.

use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The issuer of the sandbox's tokens, as on a kubeadm or kind cluster.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The audience the API server accepts (`--api-audiences` defaults to the
/// issuer); a TokenRequest without audiences gets this one.
pub const API_AUDIENCE: &str = ISSUER;
/// Clock skew allowed on `exp` and `nbf`, as go-jose's default leeway.
const LEEWAY_SECONDS: u64 = 60;
const KEY_FILE: &str = "service-account.key";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create or load the service account signing key {path}: {message}")]
    Key { path: PathBuf, message: String },
    #[error("cannot sign the token: {0}")]
    Sign(String),
    #[error("invalid bearer token: {0}")]
    Invalid(String),
}

/// What a token names besides its ServiceAccount (`kubernetes.io.pod`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// The `kubernetes.io` claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaim {
    pub namespace: String,
    pub serviceaccount: ObjectRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
}

/// A token's claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaim,
}

/// Signs and checks the sandbox's ServiceAccount tokens.
pub struct TokenSigner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    key_id: String,
}

impl TokenSigner {
    /// Loads the signing key from `dir`, creating it on first use.
    pub fn load_or_create(dir: &Path) -> Result<Self, TokenError> {
        let path = dir.join(KEY_FILE);
        if !path.exists() {
            let pair = rcgen::KeyPair::generate().map_err(|e| key_error(&path, e))?;
            write_private(&path, &pair.serialize_pem())?;
        }
        let pem = fs::read_to_string(&path).map_err(|source| TokenError::Io {
            path: path.clone(),
            source,
        })?;
        let pair = rcgen::KeyPair::from_pem(&pem).map_err(|e| key_error(&path, e))?;
        if !pair.is_compatible(&rcgen::PKCS_ECDSA_P256_SHA256) {
            return Err(key_error(&path, "not an ECDSA P-256 key"));
        }
        let encoding = EncodingKey::from_ec_pem(pem.as_bytes()).map_err(|e| key_error(&path, e))?;
        let decoding = DecodingKey::from_ec_pem(pair.public_key_pem().as_bytes())
            .map_err(|e| key_error(&path, e))?;
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            &rcgen::PublicKeyData::subject_public_key_info(&pair),
        );
        let key_id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
        Ok(Self {
            encoding,
            decoding,
            key_id,
        })
    }

    /// A signed token with these claims.
    pub fn sign(&self, claims: &Claims) -> Result<String, TokenError> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.key_id.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .map_err(|e| TokenError::Sign(e.to_string()))
    }

    /// The claims of a token this signer made, for the API server's
    /// audience, neither expired nor not yet valid.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[API_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub", "nbf"]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map(|data| data.claims)
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }
}

fn key_error(path: &Path, message: impl std::fmt::Display) -> TokenError {
    TokenError::Key {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

fn write_private(path: &Path, contents: &str) -> Result<(), TokenError> {
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    fs::write(path, contents).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(now: i64, lifetime: i64, aud: &str) -> Claims {
        Claims {
            iss: ISSUER.to_owned(),
            sub: "system:serviceaccount:db:op".to_owned(),
            aud: vec![aud.to_owned()],
            exp: now + lifetime,
            iat: now,
            nbf: now,
            jti: "id".to_owned(),
            kubernetes: KubernetesClaim {
                namespace: "db".to_owned(),
                serviceaccount: ObjectRef {
                    name: "op".to_owned(),
                    uid: "u1".to_owned(),
                },
                pod: None,
                secret: None,
            },
        }
    }

    #[test]
    fn tokens_verify_with_the_key_kept_on_disk_and_fail_otherwise() {
        let dir = tempfile::tempdir().expect("dir");
        let signer = TokenSigner::load_or_create(dir.path()).expect("key");
        let now = jiff::Timestamp::now().as_second();
        let token = signer
            .sign(&claims(now, 600, API_AUDIENCE))
            .expect("signed");
        let again = TokenSigner::load_or_create(dir.path()).expect("same key");
        assert_eq!(
            again.verify(&token).expect("valid").kubernetes.namespace,
            "db"
        );
        let other = tempfile::tempdir().expect("dir");
        let stranger = TokenSigner::load_or_create(other.path()).expect("key");
        assert!(stranger.verify(&token).is_err(), "another key's token");
        let expired = signer
            .sign(&claims(now - 7200, 3600, API_AUDIENCE))
            .expect("signed");
        assert!(signer.verify(&expired).is_err(), "expired");
        let vault = signer.sign(&claims(now, 600, "vault")).expect("signed");
        assert!(signer.verify(&vault).is_err(), "another audience");
        let mut tampered = token.clone();
        tampered.insert(token.len() / 2, 'x');
        assert!(signer.verify(&tampered).is_err(), "tampered");
    }
}
