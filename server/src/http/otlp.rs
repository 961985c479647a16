//! OTLP/HTTP: `POST /v1/traces`, `/v1/logs`, `/v1/metrics` with `application/x-protobuf`
//! or `application/json` (OTLP/JSON), optionally `Content-Encoding: gzip` (or zstd).
//! Reads the request — bearer token first (401), content type and encoding (415), the
//! body within `--max-request-bytes` as sent and once decompressed (413, a gzip bomb stops
//! at the limit), the export request itself (400) — and hands it to the OTLP service
//! (`crate::otlp`). 200 carries the export response (partial success) in the request's
//! encoding; a refusal carries a `google.rpc.Status` (protobuf requests, as OTLP/HTTP
//! asks) or `{"error_code", "message"}` (JSON and anything else) with the REST statuses.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;

use super::front_door::json_error;
use super::insert::{header_text, read_body};
use crate::auth::TABLE_HEADER;
use crate::error::ServerError;
use crate::otlp::{self, OtlpIngest, Request, Signal, Wire};
use crate::pod::Pod;
use crate::rest::body::{self, BodyError};
use crate::rest::RestError;

/// `google.rpc.Status`, the error body of OTLP/HTTP protobuf requests.
#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

/// The state of the OTLP routes.
pub type OtlpState = (Arc<Pod>, Arc<OtlpIngest>);

/// `POST /v1/traces`.
pub async fn traces(State(state): State<OtlpState>, headers: HeaderMap, body: Body) -> Response {
    answer(&state, Signal::Traces, &headers, body).await
}

/// `POST /v1/logs`.
pub async fn logs(State(state): State<OtlpState>, headers: HeaderMap, body: Body) -> Response {
    answer(&state, Signal::Logs, &headers, body).await
}

/// `POST /v1/metrics`.
pub async fn metrics(State(state): State<OtlpState>, headers: HeaderMap, body: Body) -> Response {
    answer(&state, Signal::Metrics, &headers, body).await
}

fn wire_of(content_type: Option<&str>) -> Result<Wire, RestError> {
    let value = content_type.unwrap_or("");
    let essence = value.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case(PROTOBUF) {
        Ok(Wire::Proto)
    } else if essence.eq_ignore_ascii_case(JSON) {
        Ok(Wire::Json)
    } else {
        Err(RestError::OtlpContentType(value.to_string()))
    }
}

async fn answer(state: &OtlpState, signal: Signal, headers: &HeaderMap, body: Body) -> Response {
    let wire = header_text(headers, header::CONTENT_TYPE.as_str())
        .ok()
        .flatten()
        .and_then(|t| wire_of(Some(t)).ok());
    match handle(state, signal, headers, body).await {
        Ok((out, wire)) => {
            let content_type = match wire {
                Wire::Proto => PROTOBUF,
                Wire::Json => JSON,
            };
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
                otlp::response::body(signal, out, wire),
            )
                .into_response()
        }
        Err(e) => refusal(e, wire),
    }
}

fn refusal(e: RestError, wire: Option<Wire>) -> Response {
    e.count();
    let (status, code) = e.status();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match wire {
        Some(Wire::Proto) => {
            let body = RpcStatus {
                code: e.grpc_code() as i32,
                message: e.to_string(),
            }
            .encode_to_vec();
            (
                status,
                [(header::CONTENT_TYPE, HeaderValue::from_static(PROTOBUF))],
                body,
            )
                .into_response()
        }
        _ => json_error(status, code, e.to_string()),
    }
}

async fn handle(
    (pod, otlp): &OtlpState,
    signal: Signal,
    headers: &HeaderMap,
    body: Body,
) -> Result<(otlp::Exported, Wire), RestError> {
    let caller = pod
        .auth
        .verify_bearer(header_text(headers, header::AUTHORIZATION.as_str())?)?;
    let wire = wire_of(header_text(headers, header::CONTENT_TYPE.as_str())?)?;
    let encoding = body::encoding(header_text(headers, header::CONTENT_ENCODING.as_str())?)?;
    let limit = pod.config.max_message_bytes;
    let sent = read_body(headers, body, limit).await?;
    let decoded = body::decode(&sent, encoding, limit)?;
    let request = Request::decode(signal, wire, &decoded).map_err(BodyError::Malformed)?;
    let raw = match wire {
        Wire::Proto => Some(&decoded[..]),
        Wire::Json => None,
    };
    let table = header_text(headers, TABLE_HEADER)?;
    let out = otlp::export(pod, otlp, &caller, table, &request, raw)
        .await
        .map_err(|e: ServerError| RestError::Server(e))?;
    Ok((out, wire))
}
