//! `POST /oidc/v1/token`: the OAuth2 client-credentials endpoint.
//!
//! Accepts what the official Zerobus SDKs send: HTTP basic auth with the
//! client id and secret, a form body with `grant_type=client_credentials`,
//! `scope`, `resource` and `authorization_details` (a JSON array of Unity
//! Catalog privilege requests). A request naming tables gets a token scoped to
//! exactly those tables; one naming none gets the principal's full rights
//! (what the `sluice` CLI uses). Errors follow RFC 6749 §5.2. Failed secrets are
//! paced per client id ([`super::FailurePacer`]): 429 with `Retry-After` while a
//! client id must wait.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::authenticator::Authenticator;
use super::form;
use crate::catalog::{PrincipalEntry, Privilege};
use crate::error::ServerError;

type TableRequest = form::TableRequest<Privilege>;

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
    form::parse_basic(value)
}

/// The tables named in `authorization_details` with the privileges asked for.
fn requested_tables(details: &str) -> Result<Vec<TableRequest>, String> {
    form::requested_tables(details, Privilege::parse, Privilege::Modify)
}

/// What a token will grant: `(write tables, select tables)`, the requested
/// privileges the principal holds. Every requested table must get at least
/// one privilege, or the request is refused naming the table.
fn scope(
    auth: &Authenticator,
    principal: &PrincipalEntry,
    requested: &[TableRequest],
) -> Result<(Vec<String>, Vec<String>), String> {
    let (mut write, mut select) = (Vec::new(), Vec::new());
    for r in requested {
        let mut any = false;
        for p in &r.privileges {
            let held = principal.admin
                || auth
                    .catalog()
                    .has_grant(&principal.client_id, &r.table, *p)
                    .unwrap_or(false);
            if held {
                any = true;
                match p {
                    Privilege::Modify => write.push(r.table.clone()),
                    Privilege::Select => select.push(r.table.clone()),
                }
            }
        }
        if !any {
            let asked: Vec<&str> = r.privileges.iter().map(Privilege::as_str).collect();
            return Err(format!(
                "principal `{}` holds none of the requested privileges ({}) on table `{}`",
                principal.client_id,
                asked.join(", "),
                r.table
            ));
        }
    }
    Ok((write, select))
}

/// The axum handler.
pub async fn token_endpoint(
    State(auth): State<Arc<Authenticator>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form: HashMap<String, String> = match form::parse_form(&body) {
        Ok(f) => f,
        Err(e) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &e),
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
    if auth.mode() == crate::config::AuthMode::None {
        // `--auth none`: every caller gets a token so unchanged SDK code works.
        let sub = credentials
            .map(|(id, _)| id)
            .unwrap_or_else(|| "anonymous".into());
        return match auth.signer().issue(&sub, vec!["*".into()], true) {
            Ok(token) => Json(json!({
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": auth.signer().ttl().as_secs(),
            }))
            .into_response(),
            Err(e) => oauth_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                &e.to_string(),
            ),
        };
    }
    let Some((client_id, secret)) = credentials else {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client credentials missing: use HTTP basic auth",
        );
    };
    if let Err(wait) = auth.pacer().check(&client_id) {
        metrics::counter!("sluice_token_requests_total", "outcome" => "paced").increment(1);
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut response = oauth_error(
            StatusCode::TOO_MANY_REQUESTS,
            "slow_down",
            &format!("too many failed attempts for client `{client_id}`; retry in {secs} s"),
        );
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, secs.into());
        return response;
    }
    let principal = match auth.check_client(&client_id, &secret) {
        Ok(p) => {
            auth.pacer().succeeded(&client_id);
            p
        }
        Err(_) => {
            auth.pacer().failed(&client_id);
            metrics::counter!("sluice_token_requests_total", "outcome" => "invalid_client")
                .increment(1);
            return oauth_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "invalid client id or secret",
            );
        }
    };
    let requested = match form.get("authorization_details") {
        Some(details) if !details.trim().is_empty() => match requested_tables(details) {
            Ok(t) => t,
            Err(e) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &e),
        },
        _ => Vec::new(),
    };
    if !principal.admin && requested.is_empty() {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "authorization_details must name the table to write",
        );
    }
    let (write, select, admin) = if requested.is_empty() {
        (vec!["*".to_string()], Vec::new(), principal.admin)
    } else {
        match scope(&auth, &principal, &requested) {
            Ok((w, s)) => (w, s, false),
            Err(e) => {
                metrics::counter!("sluice_token_requests_total", "outcome" => "access_denied")
                    .increment(1);
                return oauth_error(StatusCode::FORBIDDEN, "access_denied", &e);
            }
        }
    };
    let mut scope_text = write.clone();
    scope_text.extend(select.iter().map(|t| format!("{t}:select")));
    let token = match auth
        .signer()
        .issue_scoped(&principal.client_id, write, select, admin)
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
        "scope": scope_text.join(" "),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;

    #[test]
    fn authorization_details_yield_the_table_paths() {
        let d = r#"[{"type":"unity_catalog_privileges","privileges":["USE CATALOG"],"object_type":"CATALOG","object_full_path":"main"},
                    {"type":"unity_catalog_privileges","privileges":["SELECT","MODIFY"],"object_type":"TABLE","object_full_path":"Main.Default.T"}]"#;
        assert_eq!(
            requested_tables(d).expect("parse"),
            vec![TableRequest {
                table: "main.default.t".into(),
                privileges: vec![Privilege::Modify, Privilege::Select],
            }]
        );
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
