//! The checks a gRPC stream or an HTTP call passes: bearer tokens verified against the
//! catalog's signing keys, client secrets, and the principal's current grants.

use std::sync::Arc;

use crate::catalog::{Catalog, PrincipalEntry, Privilege};
use crate::config::AuthMode;
use crate::error::{Result, ServerError};

use super::caller::Caller;
use super::kek::Kek;
use super::pacing::FailurePacer;
use super::secrets::verify_secret;
use super::token::{key_id, TokenSigner};

/// Checks credentials for the gRPC and HTTP front doors.
pub struct Authenticator {
    mode: AuthMode,
    catalog: Arc<Catalog>,
    signer: TokenSigner,
    pacer: FailurePacer,
}

impl Authenticator {
    /// Builds the authenticator; creates the first signing key if none exists (the keys
    /// are kept encrypted under `kek`).
    pub fn new(
        mode: AuthMode,
        catalog: Arc<Catalog>,
        ttl: std::time::Duration,
        kek: Kek,
    ) -> Result<Self> {
        let signer = TokenSigner::load_or_create(&catalog, ttl, kek)?;
        Ok(Authenticator {
            mode,
            catalog,
            signer,
            pacer: FailurePacer::default(),
        })
    }

    /// The mode in force.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// The token signer.
    pub fn signer(&self) -> &TokenSigner {
        &self.signer
    }

    /// Failed-secret pacing of the token endpoint.
    pub fn pacer(&self) -> &FailurePacer {
        &self.pacer
    }

    /// Checks a client id and secret; returns the principal.
    pub fn check_client(&self, client_id: &str, secret: &str) -> Result<PrincipalEntry> {
        let principal = self.catalog.principal(client_id)?;
        match principal {
            Some(p) if verify_secret(&p.salt, &p.secret_hash, secret) => Ok(p),
            _ => Err(ServerError::Unauthenticated(
                "invalid client id or secret".into(),
            )),
        }
    }

    /// Verifies an `authorization` header value (`Bearer <token>`).
    pub fn verify_bearer(&self, header: Option<&str>) -> Result<Caller> {
        if self.mode == AuthMode::None {
            return Ok(Caller::Anonymous);
        }
        let value = header.ok_or_else(|| {
            ServerError::Unauthenticated("missing `authorization: Bearer <token>` header".into())
        })?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or_else(|| {
                ServerError::Unauthenticated(
                    "malformed authorization header: expected `Bearer <token>`".into(),
                )
            })?;
        let token = token.trim();
        let claims = match self.signer.verify(token) {
            Err(e) => match key_id(token) {
                // Signed with a key this process has not loaded yet (rotated
                // elsewhere): reload from the catalog and try once more.
                Some(kid) if !self.signer.knows_key(&kid) => {
                    self.signer.reload(&self.catalog)?;
                    self.signer.verify(token)?
                }
                _ => return Err(e),
            },
            Ok(c) => c,
        };
        // Pod-to-pod tokens open internal services only.
        if claims.peer {
            return Err(ServerError::PermissionDenied(
                "peer token: pod-to-pod tokens are not accepted here".into(),
            ));
        }
        // A deleted principal's tokens stop working at once, on every API.
        if self.catalog.principal(&claims.sub)?.is_none() {
            return Err(ServerError::Unauthenticated(format!(
                "principal `{}` of the access token no longer exists",
                claims.sub
            )));
        }
        Ok(Caller::Token(claims))
    }

    /// The catalog the principals and grants live in.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Adds a new signing key; returns its id.
    pub fn rotate_keys(&self) -> Result<String> {
        self.signer.rotate(&self.catalog)
    }

    /// Checks at stream creation that the caller may write `table` (lower
    /// case) now: the token must name the table, its principal must still
    /// exist and (unless admin) still hold MODIFY on it.
    pub fn authorize_write(&self, caller: &Caller, table: &str) -> Result<()> {
        let claims = match caller {
            Caller::Anonymous => return Ok(()),
            Caller::Token(c) => c,
        };
        if !claims.allows_table(table) {
            let scope = if claims.tables.is_empty() {
                "no table for writing".to_string()
            } else {
                claims.tables.join(", ")
            };
            return Err(ServerError::PermissionDenied(format!(
                "the access token is scoped to {scope}, not to table `{table}`; request a token \
                 whose authorization_details name this table"
            )));
        }
        let principal = self.catalog.principal(&claims.sub)?.ok_or_else(|| {
            ServerError::Unauthenticated(format!(
                "principal `{}` of the access token no longer exists",
                claims.sub
            ))
        })?;
        if principal.admin {
            return Ok(());
        }
        if !self
            .catalog
            .has_grant(&principal.client_id, table, Privilege::Modify)?
        {
            // A token naming the table was issued while the grant held; one for every table
            // (`*`: no authorization_details, or Kafka SASL PLAIN) never checked it.
            let why = if claims.tables.iter().any(|t| t == "*") {
                format!(
                    "principal `{}` holds no MODIFY on table `{table}`",
                    principal.client_id
                )
            } else {
                format!(
                    "principal `{}` no longer holds MODIFY on table `{table}` (the grant was \
                     revoked after the token was issued)",
                    principal.client_id
                )
            };
            return Err(ServerError::PermissionDenied(why));
        }
        Ok(())
    }
}
