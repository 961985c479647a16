//! Authentication and authorization: client secrets, signed access tokens,
//! the OAuth2 token endpoint and the checks a gRPC stream or HTTP call passes.
//!
//! Flow (what the official Zerobus SDKs do by default): the client posts its
//! id and secret (HTTP basic auth) with `authorization_details` naming the
//! table to `/oidc/v1/token`; Sluice answers with a short-lived HS256 JWT
//! scoped to that table; every gRPC stream then carries
//! `authorization: Bearer <jwt>` and `x-databricks-zerobus-table-name`.

mod endpoint;
mod secrets;
mod token;

pub use endpoint::token_endpoint;
pub use secrets::{generate_secret, hash_secret, verify_secret};
pub use token::{Claims, TokenSigner};

use std::sync::Arc;

use crate::catalog::{Catalog, PrincipalEntry};
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
        let claims = self.signer.verify(token.trim())?;
        Ok(Caller::Token(claims))
    }
}
