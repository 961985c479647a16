//! The key-encryption key (KEK): token-signing keys are stored only encrypted under it, in
//! the catalog file and in etcd alike, so a copy of the catalog mints no token.
//!
//! - Cipher: ChaCha20-Poly1305 (`ring`'s AEAD, the implementation rustls already uses), a
//!   random 96-bit nonce per encryption (a catalog holds a handful of keys), the signing
//!   key's id as associated data (a sealed key cannot be moved under another id).
//! - Envelope: `sluice-kek-v1.<kek id>.<base64url(nonce ‖ ciphertext ‖ tag)>`. The KEK id
//!   (16 hex digits of SHA-256 over a label and the key) names which KEK sealed it, so a
//!   wrong KEK is reported as such, never mistaken for damage.
//! - Where it comes from ([`KekSource`]): `--secrets-key-file PATH` or `SLUICE_SECRETS_KEY`
//!   (base64 of 32 bytes either way); without one a single node generates
//!   `<data-dir>/secrets.key` (mode 0600) once and says so. A cluster must be given one.

use std::path::Path;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use rand::RngCore;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use sha2::{Digest, Sha256};

use crate::config::KekSource;
use crate::data_dir::write_private;
use crate::error::{Result, ServerError};

/// File in the data dir holding a generated KEK (single node without one given).
pub const GENERATED_KEK_FILE: &str = "secrets.key";
/// Environment variable holding the KEK as base64.
pub const KEK_ENV: &str = "SLUICE_SECRETS_KEY";
/// First part of every envelope.
const ENVELOPE_VERSION: &str = "sluice-kek-v1";
/// Bytes of a KEK.
pub const KEK_BYTES: usize = 32;

impl KekSource {
    /// The KEK (the file is read now).
    pub fn load(&self) -> Result<Kek> {
        match self {
            KekSource::File(path) => Kek::from_file(path),
            KekSource::Base64(text) => Kek::from_base64(text, KEK_ENV),
        }
    }
}

/// A key-encryption key.
pub struct Kek {
    id: String,
    key: LessSafeKey,
    bytes: [u8; KEK_BYTES],
}

impl Kek {
    /// A KEK from its 32 bytes.
    pub fn from_bytes(bytes: [u8; KEK_BYTES]) -> Result<Kek> {
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| ServerError::Internal("building the key-encryption key".into()))?;
        let digest = Sha256::new()
            .chain_update(b"sluice key-encryption key id\0")
            .chain_update(bytes)
            .finalize();
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Ok(Kek {
            id,
            key: LessSafeKey::new(unbound),
            bytes,
        })
    }

    /// A new random KEK.
    pub fn generate() -> Result<Kek> {
        let mut bytes = [0u8; KEK_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Kek::from_bytes(bytes)
    }

    /// A KEK from base64 text (`what` names where it came from, for errors).
    pub fn from_base64(text: &str, what: &str) -> Result<Kek> {
        let bytes = STANDARD.decode(text.trim()).map_err(|e| {
            ServerError::Config(format!("{what}: the key-encryption key is not base64: {e}"))
        })?;
        let bytes: [u8; KEK_BYTES] = bytes.try_into().map_err(|b: Vec<u8>| {
            ServerError::Config(format!(
                "{what}: the key-encryption key must be {KEK_BYTES} bytes (base64), not {}; \
                 make one with `head -c 32 /dev/urandom | base64`",
                b.len()
            ))
        })?;
        Kek::from_bytes(bytes)
    }

    /// A KEK from a file holding its base64.
    pub fn from_file(path: &Path) -> Result<Kek> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServerError::io(format!("reading {}", path.display()), e))?;
        Kek::from_base64(&text, &path.display().to_string())
    }

    /// Writes the KEK's base64 to `path` (mode 0600).
    pub fn write_to(&self, path: &Path) -> Result<()> {
        write_private(
            path,
            format!("{}\n", STANDARD.encode(self.bytes)).as_bytes(),
        )
    }

    /// The KEK's id (not secret).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Encrypts `plaintext` bound to `label` (the signing key's id); returns the envelope.
    pub fn seal(&self, label: &str, plaintext: &[u8]) -> Result<String> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let mut sealed = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(label.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| ServerError::Internal(format!("encrypting {label}")))?;
        let mut body = nonce.to_vec();
        body.extend_from_slice(&sealed);
        Ok(format!(
            "{ENVELOPE_VERSION}.{}.{}",
            self.id,
            URL_SAFE_NO_PAD.encode(body)
        ))
    }

    /// Decrypts an envelope made by [`Kek::seal`] with the same `label`. A different KEK,
    /// or a damaged envelope, is an error that says which.
    pub fn open(&self, label: &str, envelope: &str) -> Result<Vec<u8>> {
        let mut parts = envelope.splitn(3, '.');
        let (version, kek_id, body) = match (parts.next(), parts.next(), parts.next()) {
            (Some(v), Some(k), Some(b)) => (v, k, b),
            _ => return Err(damaged(label, "not an envelope")),
        };
        if version != ENVELOPE_VERSION {
            return Err(damaged(
                label,
                &format!("unknown envelope version `{version}`"),
            ));
        }
        if kek_id != self.id {
            return Err(ServerError::Config(format!(
                "signing key {label} is encrypted under key-encryption key {kek_id}, but the \
                 key-encryption key given is {}: wrong --secrets-key-file / {KEK_ENV}? (the \
                 keys are never regenerated; start with the key they were encrypted under)",
                self.id
            )));
        }
        let body = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| damaged(label, "not base64"))?;
        if body.len() < NONCE_LEN {
            return Err(damaged(label, "too short"));
        }
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        let nonce =
            Nonce::try_assume_unique_for_key(nonce).map_err(|_| damaged(label, "bad nonce"))?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(label.as_bytes()), &mut sealed)
            .map_err(|_| {
                damaged(
                    label,
                    "it does not decrypt under the key-encryption key it names (damaged or forged)",
                )
            })?;
        Ok(plain.to_vec())
    }
}

fn damaged(label: &str, why: &str) -> ServerError {
    ServerError::Config(format!(
        "encrypted signing key {label} is unreadable: {why}"
    ))
}

/// The KEK of a pod: the one given; else (single node) `<data-dir>/secrets.key`, generated
/// on the first start. A cluster without one, or a single node whose catalog already holds
/// encrypted keys but whose generated file is gone, fails with a message saying what to do.
pub fn pod_kek(
    source: Option<&KekSource>,
    data_dir: &Path,
    cluster: bool,
    has_sealed_keys: bool,
) -> Result<Kek> {
    if let Some(source) = source {
        return source.load();
    }
    if cluster {
        return Err(ServerError::Config(format!(
            "a cluster pod needs the key-encryption key that protects the token-signing keys \
             in etcd: give every pod the same --secrets-key-file PATH or {KEK_ENV} (base64 of \
             32 random bytes, e.g. `head -c 32 /dev/urandom | base64`)"
        )));
    }
    let path = data_dir.join(GENERATED_KEK_FILE);
    if path.exists() {
        return Kek::from_file(&path);
    }
    if has_sealed_keys {
        return Err(ServerError::Config(format!(
            "the catalog's signing keys are encrypted, but no key-encryption key was given and \
             {} is missing: give --secrets-key-file or {KEK_ENV}",
            path.display()
        )));
    }
    let kek = Kek::generate()?;
    kek.write_to(&path)?;
    tracing::warn!(
        path = %path.display(),
        kek_id = kek.id(),
        "generated a key-encryption key for the token-signing keys (mode 0600); back it up \
         with the data dir, or give your own with --secrets-key-file / {KEK_ENV}"
    );
    Ok(kek)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_pod_without_a_kek_is_refused_and_generates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        match pod_kek(None, dir.path(), true, false) {
            Err(ServerError::Config(m)) => assert!(m.contains("a cluster pod needs"), "{m}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a cluster pod started without a key-encryption key"),
        }
        assert!(!dir.path().join(GENERATED_KEK_FILE).exists());
    }

    #[test]
    fn a_sealed_key_opens_only_under_its_kek_and_its_label() {
        let kek = Kek::generate().expect("kek");
        let envelope = kek.seal("kid-1", b"signing key bytes").expect("seal");
        assert!(envelope.starts_with(&format!("sluice-kek-v1.{}.", kek.id())));
        assert!(!envelope.contains("signing"));
        assert_eq!(
            kek.open("kid-1", &envelope).expect("open"),
            b"signing key bytes"
        );
        let moved = kek.open("kid-2", &envelope).expect_err("other label");
        assert!(moved.to_string().contains("does not decrypt"), "{moved}");
        let other = Kek::generate().expect("other kek");
        let wrong = other.open("kid-1", &envelope).expect_err("wrong kek");
        assert!(
            wrong.to_string().contains("wrong --secrets-key-file"),
            "{wrong}"
        );
    }

    #[test]
    fn base64_keys_parse_and_bad_ones_say_why() {
        let kek = Kek::from_base64(&STANDARD.encode([7u8; 32]), "env").expect("kek");
        let again = Kek::from_base64(&format!(" {}\n", STANDARD.encode([7u8; 32])), "f");
        assert_eq!(again.expect("kek").id(), kek.id());
        let short = Kek::from_base64(&STANDARD.encode([7u8; 16]), "env").err();
        assert!(short.is_some_and(|e| e.to_string().contains("32 bytes")));
        assert!(Kek::from_base64("***", "env").is_err());
    }

    #[test]
    fn a_single_node_generates_its_kek_once_and_a_cluster_must_be_given_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(pod_kek(None, dir.path(), true, false).is_err());
        assert!(pod_kek(None, dir.path(), false, true).is_err());
        let first = pod_kek(None, dir.path(), false, false).expect("generated");
        let second = pod_kek(None, dir.path(), false, true).expect("read back");
        assert_eq!(first.id(), second.id());
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(dir.path().join(GENERATED_KEK_FILE)).expect("stat");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
}
