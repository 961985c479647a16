//! `GET /healthz`: 200 with `{"status":"ok","reasons":[]}` while the pod can keep its
//! promises, else 503 with `{"status":"unhealthy","reasons":[{"check","message"}…]}`
//! (the checks are [`crate::health`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;

use crate::pod::Pod;

pub(super) async fn healthz(State(pod): State<Arc<Pod>>) -> impl IntoResponse {
    let report = pod.health();
    let status = if report.healthy() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(report))
}
