//! The status page's routes (the page itself is [`crate::status`]):
//!
//! - `GET /`: the page (HTML) for an admin caller (or anyone with `--auth none`); without
//!   a valid token 401 with the login form, with a non-admin token 403 with the form;
//! - `POST /status/login`: the form's `client_id` and `client_secret`; an admin gets 303 to
//!   `/` with the token in an HttpOnly cookie; otherwise the form again with 400 (fields
//!   missing), 401 (wrong secret), 403 (not an admin) or 503 (failed attempts paced);
//! - `GET /status/access`: 204 when the request's token may see the page, else the JSON
//!   error (401/403) — the router asks this before it renders the cluster's page.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::ServerError;
use crate::pod::Pod;
use crate::status::{session, StatusService};

/// Where the router checks a caller's access to the page.
pub const ACCESS_PATH: &str = "/status/access";

type StatusState = State<(Arc<Pod>, Arc<StatusService>)>;

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The login form with the status the refusal `e` maps to.
fn refused(e: &ServerError) -> Response {
    let status = match e {
        ServerError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        ServerError::PermissionDenied(_) => StatusCode::FORBIDDEN,
        ServerError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        ServerError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    html(status, sluice_status::page::login(&e.to_string()))
}

pub(super) async fn page(State((pod, status)): StatusState, headers: HeaderMap) -> Response {
    match session::check(&pod.auth, &headers) {
        Ok(()) => html(StatusCode::OK, status.page()),
        Err(e) => refused(&e),
    }
}

pub(super) async fn access(State((pod, _)): StatusState, headers: HeaderMap) -> Response {
    match session::check(&pod.auth, &headers) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => super::uc::error_response(&e),
    }
}

pub(super) async fn login(State((pod, _)): StatusState, body: String) -> Response {
    let form = match crate::auth::form::parse_form(&body) {
        Ok(f) => f,
        Err(e) => return refused(&ServerError::InvalidArgument(e)),
    };
    let (Some(id), Some(secret)) = (form.get("client_id"), form.get("client_secret")) else {
        return refused(&ServerError::InvalidArgument(
            "the form needs client_id and client_secret".into(),
        ));
    };
    match session::login(&pod.auth, id, secret) {
        Ok(token) => {
            let cookie = session::set_cookie(&token, pod.auth.signer().ttl().as_secs());
            (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, "/".to_string()),
                    (header::SET_COOKIE, cookie),
                ],
            )
                .into_response()
        }
        Err(e) => refused(&e),
    }
}
