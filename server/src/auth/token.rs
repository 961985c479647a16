//! Access tokens: HS256 JSON Web Tokens signed with a key kept in the catalog.
//!
//! Layout: `base64url(header).base64url(claims).base64url(hmac_sha256)`, with
//! header `{"alg":"HS256","typ":"JWT","kid":...}`. The `kid` picks the key, so
//! a rotated-out key keeps verifying tokens still in their lifetime.
//!
//! The keys are stored encrypted under the key-encryption key ([`Kek`]); only this
//! process's memory holds them in plain. A catalog written before encryption is
//! migrated on the first start ([`TokenSigner::load_or_create`]).

use std::sync::RwLock;
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::kek::Kek;
use crate::catalog::{now_millis, Catalog, SigningKey};
use crate::error::{Result, ServerError};

type HmacSha256 = Hmac<Sha256>;

/// What a token grants.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// Client id of the principal.
    pub sub: String,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// Tables this token may write (lower-case full names); `*` means all.
    pub tables: Vec<String>,
    /// Tables this token may read (SELECT) but not necessarily write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub select: Vec<String>,
    /// Whether the token may manage the catalog.
    pub admin: bool,
    /// A pod-to-pod token (`crate::cluster::peer_auth`): only internal
    /// services accept it, every user-facing gate refuses it.
    #[serde(default)]
    pub peer: bool,
}

impl Claims {
    /// Whether the token covers writes to `table`.
    pub fn allows_table(&self, table: &str) -> bool {
        let table = table.to_ascii_lowercase();
        self.tables.iter().any(|t| t == "*" || *t == table)
    }

    /// Whether the token covers reads of `table`.
    pub fn allows_select(&self, table: &str) -> bool {
        let lower = table.to_ascii_lowercase();
        self.allows_table(&lower) || self.select.contains(&lower)
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    typ: String,
    kid: String,
}

/// Signs and verifies tokens. The keys sit behind a lock so that a rotation
/// (or a reload from the catalog) is seen by every verifier at once.
pub struct TokenSigner {
    keys: RwLock<Vec<(String, Vec<u8>)>>,
    ttl: Duration,
    kek: Kek,
}

impl TokenSigner {
    /// Loads the catalog's keys (decrypting them with `kek`), creating the first one if
    /// there is none and encrypting any stored in plain (with a warning). A key that does
    /// not decrypt under `kek` fails: keys are never regenerated behind the operator's back.
    pub fn load_or_create(catalog: &Catalog, ttl: Duration, kek: Kek) -> Result<TokenSigner> {
        let signer = TokenSigner {
            keys: RwLock::new(Vec::new()),
            ttl,
            kek,
        };
        if catalog.signing_keys()?.is_empty() {
            catalog.add_signing_key(new_key(&signer.kek)?)?;
        }
        let plain = catalog
            .signing_keys()?
            .iter()
            .filter(|k| k.sealed.is_none())
            .count();
        if plain > 0 {
            let sealed = catalog.change_signing_keys(|k| seal_plain(&signer.kek, k))?;
            tracing::warn!(
                keys = sealed,
                kek_id = signer.kek.id(),
                "the catalog held token-signing keys in plain text; they are now encrypted \
                 under the key-encryption key (copies of the old catalog still hold them: \
                 rotate the signing keys with `sluice keys rotate` once old tokens expired)"
            );
        }
        signer.reload(catalog)?;
        Ok(signer)
    }

    /// Re-reads the keys from the catalog (after a rotation).
    pub fn reload(&self, catalog: &Catalog) -> Result<()> {
        let mut keys = Vec::new();
        for k in catalog.signing_keys()? {
            let secret = open_key(&self.kek, &k)?;
            keys.push((k.kid, secret));
        }
        *self
            .keys
            .write()
            .map_err(|_| ServerError::Internal("signing keys lock poisoned".into()))? = keys;
        Ok(())
    }

    /// Adds a new signing key to the catalog and signs with it from now on;
    /// older keys keep verifying tokens still in their lifetime. Returns the
    /// new key's id.
    pub fn rotate(&self, catalog: &Catalog) -> Result<String> {
        let key = new_key(&self.kek)?;
        let kid = key.kid.clone();
        catalog.add_signing_key(key)?;
        self.reload(catalog)?;
        Ok(kid)
    }

    /// Whether a key with this id is loaded.
    pub fn knows_key(&self, kid: &str) -> bool {
        self.keys
            .read()
            .map(|k| k.iter().any(|(id, _)| id == kid))
            .unwrap_or(false)
    }

    /// Lifetime of new tokens.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Issues a token for `sub` with the given grants.
    pub fn issue(&self, sub: &str, tables: Vec<String>, admin: bool) -> Result<String> {
        self.issue_scoped(sub, tables, Vec::new(), admin)
    }

    /// Issues a token that may write `tables` and read `select`.
    pub fn issue_scoped(
        &self,
        sub: &str,
        tables: Vec<String>,
        select: Vec<String>,
        admin: bool,
    ) -> Result<String> {
        let now = now_millis() / 1000;
        self.sign(&Claims {
            sub: sub.to_string(),
            iat: now,
            exp: now + self.ttl.as_secs() as i64,
            tables,
            select,
            admin,
            peer: false,
        })
    }

    /// Signs `claims` with the newest key.
    pub fn sign(&self, claims: &Claims) -> Result<String> {
        let (kid, key) = self
            .keys
            .read()
            .map_err(|_| ServerError::Internal("signing keys lock poisoned".into()))?
            .last()
            .cloned()
            .ok_or_else(|| ServerError::Internal("no signing key".into()))?;
        let header = Header {
            alg: "HS256".into(),
            typ: "JWT".into(),
            kid,
        };
        let signing_input = format!("{}.{}", b64_json(&header)?, b64_json(claims)?);
        let sig = mac(&key, signing_input.as_bytes())?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig)))
    }

    /// Verifies a token's signature and expiry; returns its claims.
    pub fn verify(&self, token: &str) -> Result<Claims> {
        let malformed = || ServerError::Unauthenticated("malformed access token".into());
        let mut parts = token.split('.');
        let (h, c, s) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(h), Some(c), Some(s), None) => (h, c, s),
            _ => return Err(malformed()),
        };
        let header: Header = decode_json(h).ok_or_else(malformed)?;
        if header.alg != "HS256" {
            return Err(malformed());
        }
        let key = self
            .keys
            .read()
            .map_err(|_| ServerError::Internal("signing keys lock poisoned".into()))?
            .iter()
            .find(|(kid, _)| *kid == header.kid)
            .map(|(_, key)| key.clone())
            .ok_or_else(|| {
                ServerError::Unauthenticated("access token signed with an unknown key".into())
            })?;
        let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| malformed())?;
        let mut m = HmacSha256::new_from_slice(&key)
            .map_err(|e| ServerError::Internal(format!("hmac key: {e}")))?;
        m.update(h.as_bytes());
        m.update(b".");
        m.update(c.as_bytes());
        m.verify_slice(&sig).map_err(|_| {
            ServerError::Unauthenticated("access token signature is invalid".into())
        })?;
        let claims: Claims = decode_json(c).ok_or_else(malformed)?;
        if claims.exp <= now_millis() / 1000 {
            return Err(ServerError::Unauthenticated(
                "access token expired; request a new one from /oidc/v1/token".into(),
            ));
        }
        Ok(claims)
    }
}

/// The token's key id, read without verifying anything (to decide whether
/// the keys need a reload).
pub fn key_id(token: &str) -> Option<String> {
    let header: Header = decode_json(token.split('.').next()?)?;
    Some(header.kid)
}

fn new_key(kek: &Kek) -> Result<SigningKey> {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    let kid = uuid::Uuid::new_v4().simple().to_string();
    Ok(SigningKey {
        sealed: Some(kek.seal(&kid, &secret)?),
        kid,
        secret: String::new(),
        created_at: now_millis(),
    })
}

/// The plain HMAC key of a stored key: decrypted with `kek`, or (a catalog from before
/// encryption) decoded from its legacy plain field.
pub fn open_key(kek: &Kek, key: &SigningKey) -> Result<Vec<u8>> {
    match &key.sealed {
        Some(envelope) => kek.open(&key.kid, envelope),
        None => STANDARD
            .decode(&key.secret)
            .map_err(|e| ServerError::Internal(format!("signing key {}: {e}", key.kid))),
    }
}

/// Encrypts a key stored in plain; returns whether it was.
fn seal_plain(kek: &Kek, key: &mut SigningKey) -> Result<bool> {
    if key.sealed.is_some() {
        return Ok(false);
    }
    let plain = open_key(kek, key)?;
    key.sealed = Some(kek.seal(&key.kid, &plain)?);
    key.secret.clear();
    Ok(true)
}

/// Re-encrypts a stored key from `old` to `new` (a key in plain is encrypted); returns
/// true (every key changes).
pub fn reseal(old: &Kek, new: &Kek, key: &mut SigningKey) -> Result<bool> {
    let plain = open_key(old, key)?;
    key.sealed = Some(new.seal(&key.kid, &plain)?);
    key.secret.clear();
    Ok(true)
}

fn mac(key: &[u8], input: &[u8]) -> Result<Vec<u8>> {
    let mut m =
        HmacSha256::new_from_slice(key).map_err(|e| ServerError::Internal(format!("hmac: {e}")))?;
    m.update(input);
    Ok(m.finalize().into_bytes().to_vec())
}

fn b64_json<T: Serialize>(value: &T) -> Result<String> {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| ServerError::Internal(format!("encoding token: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

fn decode_json<T: for<'de> Deserialize<'de>>(part: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_kek() -> Kek {
        Kek::from_bytes([9u8; 32]).expect("kek")
    }

    fn signer() -> (tempfile::TempDir, TokenSigner) {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("catalog");
        let s = TokenSigner::load_or_create(&catalog, Duration::from_secs(600), test_kek())
            .expect("signer");
        (dir, s)
    }

    #[test]
    fn an_issued_token_verifies_with_its_claims() {
        let (_d, s) = signer();
        let t = s.issue("me", vec!["a.b.c".into()], false).expect("issue");
        let c = s.verify(&t).expect("verify");
        assert_eq!(c.sub, "me");
        assert!(c.allows_table("A.B.C"));
        assert!(!c.allows_table("a.b.d"));
    }

    #[test]
    fn tokens_of_a_rotated_out_key_keep_verifying() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("catalog");
        let s = TokenSigner::load_or_create(&catalog, Duration::from_secs(600), test_kek())
            .expect("signer");
        let old = s.issue("me", vec!["a.b.c".into()], false).expect("issue");
        let kid = s.rotate(&catalog).expect("rotate");
        let new = s.issue("me", vec!["a.b.c".into()], false).expect("issue");
        assert_eq!(key_id(&new).as_deref(), Some(kid.as_str()));
        assert_ne!(key_id(&old), key_id(&new));
        s.verify(&old).expect("old token verifies");
        s.verify(&new).expect("new token verifies");
        let fresh = TokenSigner::load_or_create(&catalog, Duration::from_secs(600), test_kek())
            .expect("s2");
        fresh.verify(&old).expect("old token verifies after reload");
    }

    #[test]
    fn a_tampered_token_is_refused() {
        let (_d, s) = signer();
        let t = s.issue("me", vec!["a.b.c".into()], false).expect("issue");
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = URL_SAFE_NO_PAD
            .encode(br#"{"sub":"me","iat":0,"exp":99999999999,"tables":["*"],"admin":true}"#);
        parts[1] = &forged;
        let err = s.verify(&parts.join(".")).expect_err("forged");
        assert!(err.to_string().contains("signature"), "{err}");
        assert!(s.verify("not-a-token").is_err());
    }
}
