//! Who may see the status page: with `--auth oauth`, an admin principal only, by a token
//! sent as `Authorization: Bearer …` or in the [`COOKIE`] cookie that the login form sets
//! (its token is an ordinary admin token from the same signer, so it expires with the
//! token TTL and dies with its principal). With `--auth none` everyone may.

use axum::http::HeaderMap;

use crate::auth::Authenticator;
use crate::error::{Result, ServerError};

/// The cookie holding the status page's token.
pub const COOKIE: &str = "sluice_status";

/// The token a request carries: its bearer header, else the [`COOKIE`] cookie.
pub fn bearer(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return Some(v.to_string());
    }
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, token)| format!("Bearer {token}"))
}

/// Lets an admin (or anyone with `--auth none`) through: Unauthenticated without a valid
/// token, PermissionDenied for a non-admin one.
pub fn check(auth: &Authenticator, headers: &HeaderMap) -> Result<()> {
    let token = bearer(headers);
    let caller = auth
        .verify_bearer(token.as_deref())
        .map_err(|e| match (&token, e) {
            (None, ServerError::Unauthenticated(_)) => ServerError::Unauthenticated(
                "log in with an admin principal's client id and secret".into(),
            ),
            (_, e) => e,
        })?;
    if caller.is_admin() {
        Ok(())
    } else {
        Err(ServerError::PermissionDenied(
            "the status page is for admin principals".into(),
        ))
    }
}

/// The login form's credentials, checked like the token endpoint's (failed secrets paced
/// per client id); an admin principal gets an admin token for the cookie.
pub fn login(auth: &Authenticator, client_id: &str, secret: &str) -> Result<String> {
    if let Err(wait) = auth.pacer().check(client_id) {
        return Err(ServerError::Unavailable(format!(
            "too many failed attempts for client `{client_id}`; retry in {} s",
            wait.as_secs() + 1
        )));
    }
    let principal = match auth.check_client(client_id, secret) {
        Ok(p) => {
            auth.pacer().succeeded(client_id);
            p
        }
        Err(e) => {
            auth.pacer().failed(client_id);
            return Err(e);
        }
    };
    if !principal.admin {
        return Err(ServerError::PermissionDenied(format!(
            "principal `{client_id}` is not an admin; the status page is for admins"
        )));
    }
    auth.signer()
        .issue(&principal.client_id, vec!["*".into()], true)
}

/// The `Set-Cookie` value for `token`: HttpOnly, SameSite=Strict, for the whole site,
/// living as long as the token.
pub fn set_cookie(token: &str, max_age_secs: u64) -> String {
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age_secs}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_the_header_or_the_cookie() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(
            "cookie",
            "a=b; sluice_status=tok.en; c=d".parse().expect("header"),
        );
        assert_eq!(bearer(&h).as_deref(), Some("Bearer tok.en"));
        h.insert("authorization", "Bearer other".parse().expect("header"));
        assert_eq!(bearer(&h).as_deref(), Some("Bearer other"));
        let mut other = HeaderMap::new();
        other.insert("cookie", "sluice_statusx=1".parse().expect("header"));
        assert_eq!(bearer(&other), None);
    }

    #[test]
    fn the_cookie_is_http_only_and_strict() {
        assert_eq!(
            set_cookie("t", 60),
            "sluice_status=t; HttpOnly; SameSite=Strict; Path=/; Max-Age=60"
        );
    }
}
