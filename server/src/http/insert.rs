//! `POST /zerobus/v1/tables/{table}/insert`: reads the request (token, table, headers,
//! body within the size limit), hands it to the REST service (`crate::rest`) and answers
//! 200 with an empty body once the records are durable, or the refusal's status with
//! `{"error_code", "message"}`. The token is checked before the body is read.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::front_door::json_error;
use crate::error::ServerError;
use crate::pod::Pod;
use crate::rest::body::{self, BodyError};
use crate::rest::{self as service, Inserted, RestError, RestIngest};

/// The client's retry key header.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The handler.
pub async fn insert(
    State((pod, rest)): State<(Arc<Pod>, Arc<RestIngest>)>,
    Path(table): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match handle(&pod, &rest, &table, &headers, body).await {
        Ok(inserted) => {
            // Counted here, not in the service: MQTT writes through it too and counts its
            // records in `sluice_mqtt_records_total`.
            metrics::counter!("sluice_rest_records_total").increment(inserted.records as u64);
            StatusCode::OK.into_response()
        }
        Err(e) => {
            e.count();
            let (status, code) = e.status();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = json_error(status, code, e.to_string());
            if let Some(secs) = e.retry_after() {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
            }
            response
        }
    }
}

/// The body as sent, refused (413) past `limit` bytes: by `Content-Length` before
/// reading, and by a bounded read otherwise.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<axum::body::Bytes, RestError> {
    let too_large = BodyError::TooLarge {
        limit,
        decoded: false,
    };
    let declared =
        header_text(headers, header::CONTENT_LENGTH.as_str())?.and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large.into());
    }
    Ok(axum::body::to_bytes(body, limit).await.map_err(|e| {
        if e.to_string().contains("length limit") {
            too_large.clone()
        } else {
            BodyError::Malformed(format!("reading the body: {e}"))
        }
    })?)
}

/// A header's value as text (None: absent; not ASCII: 400).
pub(super) fn header_text<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<Option<&'a str>, RestError> {
    headers
        .get(name)
        .map(|v| {
            v.to_str().map_err(|_| {
                RestError::Server(ServerError::InvalidArgument(format!(
                    "the {name} header is not ASCII"
                )))
            })
        })
        .transpose()
}

async fn handle(
    pod: &Pod,
    rest: &RestIngest,
    table: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Inserted, RestError> {
    let caller = pod
        .auth
        .verify_bearer(header_text(headers, header::AUTHORIZATION.as_str())?)?;
    let table = table.trim().to_ascii_lowercase();
    pod.auth.authorize_write(&caller, &table)?;
    let sink = pod
        .sink_for(&table)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("table `{table}` does not exist")))?;
    let layout = body::layout(header_text(headers, header::CONTENT_TYPE.as_str())?)?;
    let encoding = body::encoding(header_text(headers, header::CONTENT_ENCODING.as_str())?)?;
    let limit = pod.config.max_message_bytes;
    let wire = read_body(headers, body, limit).await?;
    let decoded = body::decode(&wire, encoding, limit)?;
    let records = body::split(&decoded, layout)?;
    let key = header_text(headers, IDEMPOTENCY_KEY)?;
    service::insert(pod, rest, &sink, &records, key).await
}
