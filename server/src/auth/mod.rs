//! Authentication and authorization: client secrets, signed access tokens,
//! the OAuth2 token endpoint and the checks a gRPC stream or HTTP call passes.
//!
//! Flow (what the official Zerobus SDKs do by default): the client posts its
//! id and secret (HTTP basic auth) with `authorization_details` naming the
//! table to `/oidc/v1/token`; Sluice answers with a short-lived HS256 JWT
//! scoped to that table; every gRPC stream then carries
//! `authorization: Bearer <jwt>` and `x-databricks-zerobus-table-name`.

pub mod bootstrap;
#[cfg(test)]
mod cost;
mod endpoint;
pub mod form;
mod secrets;
mod token;

pub use endpoint::token_endpoint;
pub use secrets::{generate_secret, hash_secret, verify_secret};
pub use token::{key_id, Claims, TokenSigner};

use std::sync::Arc;

use crate::catalog::{Catalog, PrincipalEntry, Privilege};
use crate::config::AuthMode;
use crate::error::{Result, ServerError};

/// Header the official SDKs use to name the stream's table.
pub const TABLE_HEADER: &str = "x-databricks-zerobus-table-name";

/// What a verified caller may do.
#[derive(Clone, Debug)]
pub enum Caller {
    /// Authentication is off (`--auth none`).
    Anonymous,
    /// A verified token.
    Token(Claims),
}

impl Caller {
    /// Whether the caller may write to `table`.
    pub fn may_write(&self, table: &str) -> bool {
        match self {
            Caller::Anonymous => true,
            Caller::Token(c) => c.allows_table(table),
        }
    }

    /// Whether the caller may read `table` (its definition).
    pub fn may_read(&self, table: &str) -> bool {
        match self {
            Caller::Anonymous => true,
            Caller::Token(c) => c.allows_select(table),
        }
    }

    /// Whether the caller may manage the catalog.
    pub fn is_admin(&self) -> bool {
        match self {
            Caller::Anonymous => true,
            Caller::Token(c) => c.admin,
        }
    }
}

/// Checks credentials for the gRPC and HTTP front doors.
pub struct Authenticator {
    mode: AuthMode,
    catalog: Arc<Catalog>,
    signer: TokenSigner,
}

impl Authenticator {
    /// Builds the authenticator; creates the first signing key if none exists.
    pub fn new(mode: AuthMode, catalog: Arc<Catalog>, ttl: std::time::Duration) -> Result<Self> {
        let signer = TokenSigner::load_or_create(&catalog, ttl)?;
        Ok(Authenticator {
            mode,
            catalog,
            signer,
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
            return Err(ServerError::PermissionDenied(format!(
                "principal `{}` no longer holds MODIFY on table `{table}` (the grant was revoked \
                 after the token was issued)",
                principal.client_id
            )));
        }
        Ok(())
    }
}
