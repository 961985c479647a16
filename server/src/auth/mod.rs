//! Authentication and authorization: client secrets, signed access tokens,
//! the OAuth2 token endpoint and the checks a gRPC stream or HTTP call passes.
//!
//! Flow (what the official Zerobus SDKs do by default): the client posts its
//! id and secret (HTTP basic auth) with `authorization_details` naming the
//! table to `/oidc/v1/token`; Sluice answers with a short-lived HS256 JWT
//! scoped to that table; every gRPC stream then carries
//! `authorization: Bearer <jwt>` and `x-databricks-zerobus-table-name`.
//! The signing keys are stored encrypted under the key-encryption key ([`kek`]).

mod authenticator;
pub mod bootstrap;
mod caller;
#[cfg(test)]
mod cost;
mod endpoint;
pub mod form;
pub mod kek;
mod pacing;
mod secrets;
mod token;

pub use crate::config::KekSource;
pub use authenticator::Authenticator;
pub use caller::{Caller, TABLE_HEADER};
pub use endpoint::token_endpoint;
pub use kek::Kek;
pub use pacing::FailurePacer;
pub use secrets::{generate_secret, hash_secret, verify_secret};
pub use token::{key_id, open_key, reseal, Claims, TokenSigner};
