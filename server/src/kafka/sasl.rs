//! SASL for Kafka clients: PLAIN (user name = client id, password = client secret,
//! checked like the token endpoint, with its failure pacing) and OAUTHBEARER (a Sluice
//! access token, verified like a gRPC `authorization: Bearer` header). Either gives the
//! connection a [`Caller`]; each Produce then passes the same write check as a stream
//! (`Authenticator::authorize_write`: the token's tables, the principal's current grants).

use crate::auth::{Authenticator, Caller, Claims};
use crate::config::AuthMode;
use crate::error::{Result, ServerError};

/// The mechanisms offered in SaslHandshake.
pub const MECHANISMS: [&str; 2] = ["PLAIN", "OAUTHBEARER"];

/// A mechanism the client chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// RFC 4616.
    Plain,
    /// RFC 7628 (Kafka's KIP-255 client message).
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism named `name` (None: not offered).
    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            _ => None,
        }
    }
}

/// `authzid NUL authcid NUL passwd` → (authcid, passwd).
pub fn parse_plain(bytes: &[u8]) -> Result<(String, String)> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ServerError::Unauthenticated("SASL/PLAIN message is not UTF-8".into()))?;
    let mut parts = text.split('\0');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(_authzid), Some(user), Some(password), None) if !user.is_empty() => {
            Ok((user.to_string(), password.to_string()))
        }
        _ => Err(ServerError::Unauthenticated(
            "SASL/PLAIN message must be authzid NUL username NUL password".into(),
        )),
    }
}

/// The bearer token of an OAUTHBEARER client first message
/// (`n,[a=authzid],` `\x01auth=Bearer <token>\x01[key=value\x01…]\x01`).
pub fn parse_oauthbearer(bytes: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        ServerError::Unauthenticated("SASL/OAUTHBEARER message is not UTF-8".into())
    })?;
    let bad = || {
        ServerError::Unauthenticated(
            "SASL/OAUTHBEARER message must be a GS2 header then \\x01auth=Bearer <token>\\x01\\x01"
                .into(),
        )
    };
    let (gs2, rest) = text.split_once('\x01').ok_or_else(bad)?;
    if !gs2.starts_with("n,") && !gs2.starts_with("y,") {
        return Err(bad());
    }
    rest.split('\x01')
        .find_map(|kv| kv.strip_prefix("auth="))
        .and_then(|auth| {
            auth.strip_prefix("Bearer ")
                .or_else(|| auth.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(bad)
}

/// Authenticates one SaslAuthenticate message under `mechanism`.
pub fn authenticate(auth: &Authenticator, mechanism: Mechanism, bytes: &[u8]) -> Result<Caller> {
    match mechanism {
        Mechanism::Plain => {
            let (client_id, secret) = parse_plain(bytes)?;
            if auth.mode() == AuthMode::None {
                return Ok(Caller::Anonymous);
            }
            if let Err(wait) = auth.pacer().check(&client_id) {
                return Err(ServerError::Unauthenticated(format!(
                    "too many failed attempts for client `{client_id}`; retry in {} s",
                    wait.as_secs().max(1)
                )));
            }
            let principal = match auth.check_client(&client_id, &secret) {
                Ok(p) => {
                    auth.pacer().succeeded(&client_id);
                    p
                }
                Err(e) => {
                    auth.pacer().failed(&client_id);
                    return Err(e);
                }
            };
            let now = chrono::Utc::now().timestamp();
            // Like a token without authorization_details: every table, each Produce
            // checked against the principal's grants at that moment.
            Ok(Caller::Token(Claims {
                sub: principal.client_id,
                iat: now,
                exp: i64::MAX,
                tables: vec!["*".into()],
                select: Vec::new(),
                admin: principal.admin,
                peer: false,
            }))
        }
        Mechanism::OAuthBearer => {
            let token = parse_oauthbearer(bytes)?;
            auth.verify_bearer(Some(&format!("Bearer {token}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_takes_the_second_and_third_parts() {
        assert_eq!(
            parse_plain(b"\0alice\0s3cret").expect("plain"),
            ("alice".to_string(), "s3cret".to_string())
        );
        assert!(parse_plain(b"admin\0alice\0s3\0").is_err());
        assert!(parse_plain(b"\0\0pw").is_err());
        assert!(parse_plain(b"alice").is_err());
    }

    #[test]
    fn oauthbearer_finds_the_token_after_the_gs2_header() {
        let message = b"n,,\x01auth=Bearer abc.def.ghi\x01\x01";
        assert_eq!(parse_oauthbearer(message).expect("token"), "abc.def.ghi");
        let with_ext = b"n,a=alice,\x01host=x\x01auth=Bearer t0k\x01\x01";
        assert_eq!(parse_oauthbearer(with_ext).expect("token"), "t0k");
        assert!(parse_oauthbearer(b"n,,\x01auth=Basic abc\x01\x01").is_err());
        assert!(parse_oauthbearer(b"p=x,,\x01auth=Bearer a\x01\x01").is_err());
        assert!(parse_oauthbearer(b"\xff").is_err());
    }
}
