//! Pod-to-pod authentication for the internal gRPC services
//! (`sluice.cluster.v1.*`): a short-lived token signed with the cluster's
//! current signing key (the pods share it through the catalog, sealed under
//! the KEK) with `peer = true`. User-facing gates refuse such tokens; the
//! internal services accept nothing else.

use std::time::Duration;

use crate::auth::{key_id, Authenticator, Claims, TokenSigner};
use crate::catalog::now_millis;
use crate::error::Result;

/// Lifetime of a peer token; callers renew at half of it.
pub const PEER_TOKEN_TTL: Duration = Duration::from_secs(300);

/// A peer token for pod `pod_id`: sub `pod:<pod_id>`, `peer = true`, no
/// tables, not admin, valid [`PEER_TOKEN_TTL`].
pub fn peer_token(signer: &TokenSigner, pod_id: &str) -> Result<String> {
    let now = now_millis() / 1000;
    signer.sign(&Claims {
        sub: format!("pod:{pod_id}"),
        iat: now,
        exp: now + PEER_TOKEN_TTL.as_secs() as i64,
        tables: Vec::new(),
        select: Vec::new(),
        admin: false,
        peer: true,
    })
}

/// Verifies the `authorization: Bearer <peer token>` of an internal call and
/// returns the calling pod's id. UNAUTHENTICATED without a token or with a
/// bad one; PERMISSION_DENIED for a token that is not a peer token.
pub fn verify_peer(
    signer: &TokenSigner,
    metadata: &tonic::metadata::MetadataMap,
) -> std::result::Result<String, tonic::Status> {
    let value = metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| tonic::Status::unauthenticated("missing peer token"))?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(|| tonic::Status::unauthenticated("malformed authorization header"))?;
    let claims = signer
        .verify(token.trim())
        .map_err(|e| tonic::Status::unauthenticated(e.to_string()))?;
    if !claims.peer {
        return Err(tonic::Status::permission_denied(
            "not a peer token: internal services take pod-to-pod tokens only",
        ));
    }
    Ok(claims
        .sub
        .strip_prefix("pod:")
        .unwrap_or(&claims.sub)
        .to_string())
}

/// [`verify_peer`] for an internal service: when the token names a signing
/// key this process has not loaded (rotated on another pod), the keys are
/// reloaded from the catalog once first. Returns the calling pod's id.
pub fn peer_caller(
    auth: &Authenticator,
    metadata: &tonic::metadata::MetadataMap,
) -> std::result::Result<String, tonic::Status> {
    let signer = auth.signer();
    let unknown_key = metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(' ').next())
        .and_then(key_id)
        .is_some_and(|kid| !signer.knows_key(&kid));
    if unknown_key {
        if let Err(e) = signer.reload(auth.catalog()) {
            tracing::warn!("reloading the signing keys failed: {e}");
        }
    }
    verify_peer(signer, metadata)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::metadata::MetadataMap;

    use super::{peer_token, verify_peer};
    use crate::auth::{Kek, TokenSigner};
    use crate::catalog::Catalog;

    fn with_bearer(token: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
        m
    }

    #[test]
    fn peer_tokens_pass_and_user_tokens_do_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("catalog");
        let kek = Kek::from_bytes([7; 32]).expect("kek");
        let signer =
            TokenSigner::load_or_create(&catalog, Duration::from_secs(60), kek).expect("signer");
        let peer = peer_token(&signer, "pod-1").expect("peer token");
        assert_eq!(
            verify_peer(&signer, &with_bearer(&peer)).ok(),
            Some("pod-1".into())
        );
        let user = signer.issue("alice", vec!["*".into()], true).expect("user");
        let denied = verify_peer(&signer, &with_bearer(&user)).expect_err("user token");
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        let missing = verify_peer(&signer, &MetadataMap::new()).expect_err("no token");
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
        let bad = verify_peer(&signer, &with_bearer("x.y.z")).expect_err("bad token");
        assert_eq!(bad.code(), tonic::Code::Unauthenticated);
    }
}
