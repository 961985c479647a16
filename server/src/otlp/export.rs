//! One OTLP export, after the caller was authenticated: pick the table (the
//! `x-databricks-zerobus-table-name` header, else the pod's default table of the signal),
//! check the caller may write it and that it is a table of the request's signal,
//! transcode the items that fit into one Arrow batch, log the request as one OTLP WAL
//! frame (kind 6), add the batch to the memtable and answer once the frame is durable —
//! the streams' ack rule. Items that do not fit are counted with the first one's reason
//! (OTLP partial success); a request none of whose items fit writes nothing.
//!
//! Each pod process has one OTLP stream key (random at start) and numbers every item it
//! receives, across tables; replay transcodes a frame again with its stored first offset
//! and arrival time, so replayed rows are the rows that were acked.

use std::sync::atomic::{AtomicI64, Ordering};

use super::request::Request;
use super::schema::Signal;
use crate::auth::Caller;
use crate::error::{Result, ServerError};
use crate::journal::frames::{encode_otlp, OtlpFrame, KIND_OTLP};
use crate::pod::Pod;
use crate::rest::insert::MEMTABLE_LIMIT_FLUSHES;

/// The OTLP side of a pod.
pub struct OtlpIngest {
    stream_key: u64,
    next_offset: AtomicI64,
}

impl Default for OtlpIngest {
    fn default() -> Self {
        OtlpIngest {
            stream_key: rand::random::<u64>(),
            next_offset: AtomicI64::new(0),
        }
    }
}

/// What an accepted export did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Items written (durable).
    pub accepted: usize,
    /// Items refused.
    pub rejected: i64,
    /// Why the first refused item was refused (empty: none was).
    pub message: String,
}

/// Writes the items of `request` that fit into the table named by `table` (else the
/// default table of its signal) for `caller`, and returns once they are durable.
pub async fn export(
    pod: &Pod,
    otlp: &OtlpIngest,
    caller: &Caller,
    table: Option<&str>,
    request: &Request,
    raw: Option<&[u8]>,
) -> Result<Exported> {
    if pod.is_shutting_down() {
        return Err(ServerError::Unavailable(
            "this pod is shutting down; retry (another pod or after the restart)".into(),
        ));
    }
    let signal = request.signal();
    let defaults = &pod.config.otlp_tables;
    let default = match signal {
        Signal::Traces => &defaults.traces,
        Signal::Logs => &defaults.logs,
        Signal::Metrics => &defaults.metrics,
    };
    let table = match table.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => t.to_ascii_lowercase(),
        None => default
            .as_deref()
            .map(str::to_ascii_lowercase)
            .ok_or_else(|| {
                ServerError::InvalidArgument(format!(
                    "no table: send the x-databricks-zerobus-table-name header (this pod has \
                     no --otlp-{}-table)",
                    signal.name()
                ))
            })?,
    };
    pod.auth.authorize_write(caller, &table)?;
    let sink = pod
        .sink_for(&table)
        .await?
        .ok_or_else(|| ServerError::NotFound(format!("table `{table}` does not exist")))?;
    match Signal::of_table(&sink.schema()) {
        Some(s) if s == signal => {}
        Some(other) => {
            return Err(ServerError::InvalidArgument(format!(
                "table `{table}` is an OTLP {} table; {} go to a table created with \
                 `--otlp {}`",
                other.name(),
                signal.items(),
                signal.name()
            )))
        }
        None => {
            return Err(ServerError::InvalidArgument(format!(
                "table `{table}` is not an OTLP table: create one with `sluice table create \
                 NAME --otlp {}`",
                signal.name()
            )))
        }
    }
    let items = request.items();
    let first_offset = otlp.next_offset.fetch_add(items as i64, Ordering::Relaxed);
    let received_at_us = crate::sink::system_columns::now_micros();
    let schema = sink.batch_builder()?.arrow_schema();
    let rows = request
        .transcode(schema, otlp.stream_key, first_offset, received_at_us)
        .map_err(|e| ServerError::Internal(format!("OTLP rows for {table}: {e}")))?;
    let exported = Exported {
        accepted: rows.batch.num_rows(),
        rejected: rows.rejected,
        message: rows.message.unwrap_or_default(),
    };
    metrics::counter!("sluice_otlp_rejected_items_total", "signal" => signal.name())
        .increment(exported.rejected as u64);
    if exported.accepted == 0 {
        return Ok(exported);
    }
    let encoded;
    let request_bytes = match raw {
        Some(raw) => raw,
        None => {
            encoded = request.encode();
            &encoded
        }
    };
    let payload = encode_otlp(&OtlpFrame {
        table: sink.name().to_string(),
        signal: signal.code(),
        stream_key: otlp.stream_key,
        first_offset,
        received_at_us,
        request: request_bytes,
    });
    let bytes = request_bytes.len();
    let batch = sink.with_system_columns(rows.batch, otlp.stream_key, rows.offsets.into_iter())?;
    sink.wait_for_room(
        pod.config
            .flush_bytes
            .saturating_mul(MEMTABLE_LIMIT_FLUSHES),
    )
    .await;
    let lsn = sink.append(KIND_OTLP, payload, Some(batch)).await?;
    pod.wal.wait_durable(lsn).await?;
    metrics::counter!("sluice_otlp_items_total", "signal" => signal.name())
        .increment(exported.accepted as u64);
    sink.ingress().written(exported.accepted, bytes);
    pod.load.record_ingress(bytes);
    Ok(exported)
}
