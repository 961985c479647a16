//! The HTTP side of the pod's one port: the Unity-Catalog-shaped tables API,
//! the OAuth token endpoint, REST insert, OTLP/HTTP, health, Prometheus metrics and the
//! status page (`GET /`, its login form and access check: `status`). Every
//! catalog and admin route sits behind [`authenticated::require_token`]; REST
//! insert checks its token itself (its refusals are Zerobus-shaped). What is
//! not served answers 404 or 405 ([`front_door`]).

mod authenticated;
pub mod front_door;
mod grants;
mod health;
mod insert;
mod otlp;
mod principals;
mod status;
mod tables;
mod uc;
mod upkeep;

pub use grants::{PermissionChange, PermissionsUpdate};
pub use principals::{CreatedPrincipal, PrincipalInfo};
pub use uc::{column_infos, table_info, ColumnInfo, TableInfo};

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use axum::Router;

use crate::pod::Pod;

/// The HTTP routes of a pod (`otlp`: its OTLP side, shared with the gRPC services;
/// `status`: the status page's service, whose sampler the caller runs).
pub fn router(
    pod: Arc<Pod>,
    otlp: Arc<crate::otlp::OtlpIngest>,
    status: Arc<crate::status::StatusService>,
) -> Router {
    let token = Router::new()
        .route("/oidc/v1/token", post(crate::auth::token_endpoint))
        .with_state(pod.auth.clone());
    let rest = Arc::new(crate::rest::RestIngest::new(pod.idempotency.clone()));
    let insert = Router::new()
        .route("/zerobus/v1/tables/{table}/insert", post(insert::insert))
        .with_state((pod.clone(), rest));
    let otlp = Router::new()
        .route("/v1/traces", post(otlp::traces))
        .route("/v1/logs", post(otlp::logs))
        .route("/v1/metrics", post(otlp::metrics))
        .with_state((pod.clone(), otlp));
    let status = Router::new()
        .route("/", get(status::page))
        .route(sluice_status::page::LOGIN_PATH, post(status::login))
        .route(status::ACCESS_PATH, get(status::access))
        .with_state((pod.clone(), status));
    let public = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(pod.clone());
    api_routes()
        .route_layer(axum::middleware::from_fn_with_state(
            pod.clone(),
            authenticated::require_token,
        ))
        .with_state(pod)
        .merge(public)
        .merge(insert)
        .merge(otlp)
        .merge(token)
        .merge(status)
}

/// `(method, path)` of every catalog and admin route: each answers 401 to a request
/// without a valid token before it reads anything else (`{…}` segments are path
/// parameters).
pub const PROTECTED_ROUTES: [(&str, &str); 13] = [
    ("GET", "/api/2.1/unity-catalog/tables"),
    ("POST", "/api/2.1/unity-catalog/tables"),
    ("GET", "/api/2.1/unity-catalog/tables/{full_name}"),
    ("DELETE", "/api/2.1/unity-catalog/tables/{full_name}"),
    ("PATCH", "/api/2.1/unity-catalog/tables/{full_name}"),
    (
        "GET",
        "/api/2.1/unity-catalog/permissions/table/{full_name}",
    ),
    (
        "PATCH",
        "/api/2.1/unity-catalog/permissions/table/{full_name}",
    ),
    ("GET", "/api/sluice/v1/principals"),
    ("POST", "/api/sluice/v1/principals"),
    ("DELETE", "/api/sluice/v1/principals/{client_id}"),
    ("POST", "/api/sluice/v1/keys/rotate"),
    ("POST", "/api/sluice/v1/tables/{full_name}/optimize"),
    ("POST", "/api/sluice/v1/tables/{full_name}/vacuum"),
];

/// The catalog and admin routes (each needs a token; listed in [`PROTECTED_ROUTES`]).
fn api_routes() -> Router<Arc<Pod>> {
    Router::new()
        .route(
            "/api/2.1/unity-catalog/tables",
            get(tables::list).post(tables::create),
        )
        .route(
            "/api/2.1/unity-catalog/tables/{full_name}",
            get(tables::get).delete(tables::delete).patch(tables::alter),
        )
        .route(
            "/api/2.1/unity-catalog/permissions/table/{full_name}",
            get(grants::get).patch(grants::update),
        )
        .route(
            "/api/sluice/v1/principals",
            get(principals::list).post(principals::create),
        )
        .route(
            "/api/sluice/v1/principals/{client_id}",
            delete(principals::delete),
        )
        .route("/api/sluice/v1/keys/rotate", post(principals::rotate_keys))
        .route(
            "/api/sluice/v1/tables/{full_name}/optimize",
            post(upkeep::optimize),
        )
        .route(
            "/api/sluice/v1/tables/{full_name}/vacuum",
            post(upkeep::vacuum),
        )
}

async fn readyz(State(pod): State<Arc<Pod>>) -> impl IntoResponse {
    if pod.is_shutting_down() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else {
        (StatusCode::OK, "ready")
    }
}

async fn metrics_text(State(pod): State<Arc<Pod>>) -> impl IntoResponse {
    crate::status::publish_gauges(&pod);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        crate::metrics_export::render(),
    )
}
