//! The pod's one port splits here: a request whose content type is `application/grpc…`
//! goes to the gRPC services, every other request to the HTTP routes. So a plain HTTP
//! client never reaches tonic's fallback (which answers 200 with `grpc-status: 12`, read
//! by a plain client as success): a path nobody serves answers 404 and a served path with
//! the wrong method 405 (with `Allow`), both as a JSON `{"error_code", "message"}` body.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use tower::ServiceExt;

/// Path prefix of the Zerobus gRPC service (a plain HTTP request there gets 415).
const GRPC_SERVICE_PREFIX: &str = "/databricks.zerobus.";

/// One router for the port: gRPC by content type, else `http` (given its 404 and 405 answers).
pub fn front_door(grpc: Router, http: Router) -> Router {
    let http = http
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let target = if is_grpc(&request) {
            grpc.clone()
        } else {
            http.clone()
        };
        async move { Ok::<_, Infallible>(target.oneshot(request).await.into_response()) }
    }))
}

/// Whether a request is a gRPC call (content type `application/grpc`, `…+proto`, …).
pub fn is_grpc<B>(request: &axum::http::Request<B>) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// A JSON error body `{"error_code", "message"}` with `status`.
pub fn json_error(status: StatusCode, code: &str, message: String) -> Response {
    (
        status,
        Json(serde_json::json!({ "error_code": code, "message": message })),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with(GRPC_SERVICE_PREFIX) {
        return json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "INVALID_PARAMETER_VALUE",
            format!(
                "{} is a gRPC method: send it as gRPC (content-type application/grpc)",
                uri.path()
            ),
        );
    }
    json_error(
        StatusCode::NOT_FOUND,
        "ENDPOINT_NOT_FOUND",
        format!("no HTTP endpoint at {}", uri.path()),
    )
}

async fn method_not_allowed(request: axum::http::Request<Body>) -> Response {
    json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        format!(
            "{} does not serve {}; see the Allow header",
            request.uri().path(),
            request.method()
        ),
    )
}
