//! Whether a role's stored SCRAM-SHA-256 verifier (`pg_authid.rolpassword`)
//! is one of a given password, computed as PostgreSQL's own check does
//! (RFC 5802 with SASLprep): a password that already matches is not set
//! again, so a converged role costs no write.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::{digest, hmac, pbkdf2};

/// True when `verifier` (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`)
/// was made from `password`. Anything else (an MD5 hash, a malformed
/// verifier, none) is false: the password is then set.
pub fn verifies(verifier: &str, password: &str) -> bool {
    let Some(parts) = Parts::parse(verifier) else {
        return false;
    };
    // PostgreSQL prepares the password with SASLprep, and uses it as it is
    // when SASLprep refuses it.
    let prepared = stringprep::saslprep(password)
        .map(|p| p.into_owned())
        .unwrap_or_else(|_| password.to_owned());
    let mut salted = [0u8; digest::SHA256_OUTPUT_LEN];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        parts.iterations,
        &parts.salt,
        prepared.as_bytes(),
        &mut salted,
    );
    let key = hmac::Key::new(hmac::HMAC_SHA256, &salted);
    let client_key = hmac::sign(&key, b"Client Key");
    let stored_key = digest::digest(&digest::SHA256, client_key.as_ref());
    let server_key = hmac::sign(&key, b"Server Key");
    stored_key.as_ref() == parts.stored_key.as_slice()
        && server_key.as_ref() == parts.server_key.as_slice()
}

struct Parts {
    iterations: std::num::NonZeroU32,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl Parts {
    fn parse(verifier: &str) -> Option<Parts> {
        let rest = verifier.strip_prefix("SCRAM-SHA-256$")?;
        let (iterations_salt, keys) = rest.split_once('$')?;
        let (iterations, salt) = iterations_salt.split_once(':')?;
        let (stored_key, server_key) = keys.split_once(':')?;
        Some(Parts {
            iterations: iterations.parse().ok()?,
            salt: STANDARD.decode(salt).ok()?,
            stored_key: STANDARD.decode(stored_key).ok()?,
            server_key: STANDARD.decode(server_key).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passwords::scram_verifier;

    #[test]
    fn a_verifier_matches_its_own_password_only() {
        for password in ["s3cret", "it's \"quoted\" $1 \\", "pässwörd", ""] {
            let verifier = scram_verifier(password);
            assert!(verifies(&verifier, password), "{password:?}");
            assert!(!verifies(&verifier, "other"), "{password:?}");
        }
    }

    #[test]
    fn a_verifier_made_by_postgresql_is_read() {
        // PostgreSQL 15: `SET password_encryption = 'scram-sha-256';
        // CREATE ROLE r PASSWORD 'it''s pässwörd';` then
        // `SELECT rolpassword FROM pg_authid WHERE rolname = 'r'`.
        let verifier = "SCRAM-SHA-256$4096:q9RoA6vWE+jtTG1OZ4rNuw==$3Rz8cBJrZu7qXH1/Q/hSYBzlJvz52YvWuA+9bR1Fseg=:sYZcC3p6vik2sN7weGSeTM4shLG6YKnu5c5CYgxmxWE=";
        assert!(verifies(verifier, "it's pässwörd"));
        assert!(!verifies(verifier, "it's passwörd"));
    }

    #[test]
    fn other_formats_never_match() {
        assert!(!verifies("md5abcdef", "x"));
        assert!(!verifies("SCRAM-SHA-256$x:y$z", "x"));
        assert!(!verifies("", ""));
    }
}
