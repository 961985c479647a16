//! The gate in front of every admin and catalog route: the bearer token is verified before
//! the request's path, query or body is looked at, so an anonymous or forged request gets
//! 401 whatever it carries (never a 400/422 that would tell it about the body's shape).
//! The handlers still check what the verified caller may do (403).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::uc::error_response;
use crate::pod::Pod;

/// Answers 401 unless the request carries a valid token (`--auth none`: everyone passes).
pub async fn require_token(
    State(pod): State<Arc<Pod>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match pod.auth.verify_bearer(header) {
        Ok(caller) => {
            // Handlers take the verified caller from here instead of verifying again.
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => error_response(&e),
    }
}
