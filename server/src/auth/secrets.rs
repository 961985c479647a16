//! Client secrets: generation and salted hashing. Only the hash is stored.

use rand::RngCore;
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random secret (256 bits, hex).
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

/// Returns `(salt, hash)` for a secret.
pub fn hash_secret(secret: &str) -> (String, String) {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = hex(&salt);
    let hash = digest(&salt, secret);
    (salt, hash)
}

fn digest(salt: &str, secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt.as_bytes());
    h.update(secret.as_bytes());
    hex(&h.finalize())
}

/// Whether `secret` matches the stored salt and hash (constant-time compare).
pub fn verify_secret(salt: &str, hash: &str, secret: &str) -> bool {
    let computed = digest(salt, secret);
    computed.len() == hash.len()
        && computed
            .bytes()
            .zip(hash.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hashed_secret_verifies_and_a_wrong_one_does_not() {
        let secret = generate_secret();
        let (salt, hash) = hash_secret(&secret);
        assert!(verify_secret(&salt, &hash, &secret));
        assert!(!verify_secret(&salt, &hash, "wrong"));
        assert_ne!(hash, secret);
    }
}
