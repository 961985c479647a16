//! `POST /oidc/v1/token`: the OAuth2 client-credentials endpoint.
//!
//! Accepts what the official Zerobus SDKs send: HTTP basic auth with the
//! client id and secret, a form body with `grant_type=client_credentials`,
//! `scope`, `resource` and `authorization_details` (a JSON array of Unity
//! Catalog privilege requests). A request naming tables gets a token scoped to
//! exactly those tables; one naming none gets the principal's full rights
//! (what the `sluice` CLI uses). Errors follow RFC 6749 §5.2.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

use super::Authenticator;
use crate::error::ServerError;

#[derive(Deserialize)]
struct AuthorizationDetail {
    #[serde(default)]
    object_type: String,
    #[serde(default)]
    object_full_path: String,
}

fn oauth_error(status: StatusCode, code: &str, description: &str) -> Response {
    (
        status,
        Json(json!({ "error": code, "error_description": description })),
    )
        .into_response()
}

/// Parses `Authorization: Basic base64(id:secret)`.
pub fn parse_basic_auth(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_string(), secret.to_string()))
}

/// The tables named in `authorization_details`, lower case.
fn requested_tables(details: &str) -> Result<Vec<String>, String> {
    let parsed: Vec<AuthorizationDetail> = serde_json::from_str(details)
        .map_err(|e| format!("authorization_details is not a JSON array of objects: {e}"))?;
    Ok(parsed
        .into_iter()
        .filter(|d| d.object_type.eq_ignore_ascii_case("TABLE"))
        .map(|d| d.object_full_path.to_ascii_lowercase())
        .collect())
}

/// The axum handler.
pub async fn token_endpoint(
    State(auth): State<Arc<Authenticator>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form: HashMap<String, String> = match serde_urlencoded::from_str(&body) {
        Ok(f) => f,
        Err(e) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("body is not a form: {e}"),
            )
        }
    };
    match form.get("grant_type").map(String::as_str) {
        Some("client_credentials") => {}
        Some(other) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                &format!("grant_type `{other}` is not supported; use client_credentials"),
            )
        }
        None => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "grant_type is missing",
            )
        }
    }
    let credentials = parse_basic_auth(&headers).or_else(|| {
        Some((
            form.get("client_id")?.clone(),
            form.get("client_secret")?.clone(),
        ))
    });
    let Some((client_id, secret)) = credentials else {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client credentials missing: use HTTP basic auth",
        );
    };
    let principal = match auth.check_client(&client_id, &secret) {
        Ok(p) => p,
        Err(_) => {
            metrics::counter!("sluice_token_requests_total", "outcome" => "invalid_client")
                .increment(1);
            return oauth_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "invalid client id or secret",
            );
        }
    };
    let tables = match form.get("authorization_details") {
        Some(details) if !details.trim().is_empty() => match requested_tables(details) {
            Ok(t) => t,
            Err(e) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &e),
        },
        _ => Vec::new(),
    };
    if !principal.admin && tables.is_empty() {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "authorization_details must name the table to write",
        );
    }
    let (grant_tables, admin) = if tables.is_empty() {
        (vec!["*".to_string()], principal.admin)
    } else {
        (tables, false)
    };
    let token = match auth
        .signer()
        .issue(&principal.client_id, grant_tables.clone(), admin)
    {
        Ok(t) => t,
        Err(e) => {
            let e: ServerError = e;
            return oauth_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                &e.to_string(),
            );
        }
    };
    metrics::counter!("sluice_token_requests_total", "outcome" => "issued").increment(1);
    Json(json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": auth.signer().ttl().as_secs(),
        "scope": grant_tables.join(" "),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_details_yield_the_table_paths() {
        let d = r#"[{"type":"unity_catalog_privileges","privileges":["USE CATALOG"],"object_type":"CATALOG","object_full_path":"main"},
                    {"type":"unity_catalog_privileges","privileges":["SELECT","MODIFY"],"object_type":"TABLE","object_full_path":"Main.Default.T"}]"#;
        assert_eq!(requested_tables(d).expect("parse"), vec!["main.default.t"]);
        assert!(requested_tables("{").is_err());
    }

    #[test]
    fn basic_auth_is_parsed() {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            format!("Basic {}", STANDARD.encode("id:se:cret"))
                .parse()
                .expect("header"),
        );
        assert_eq!(parse_basic_auth(&h), Some(("id".into(), "se:cret".into())));
    }
}
