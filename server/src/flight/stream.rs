//! One Arrow Flight `DoPut` connection: opens the stream (table header, write right, the
//! IPC schema checked against the table once, the stream-open frame logged), answers the
//! ready signal, then takes its `FlightData` one by one — dictionary batches kept, each
//! record batch's `offset_id` checked (0, 1, 2, … per connection), decoded, made into the
//! table's shape, logged as one arrow-batch WAL frame and appended to the memtable as
//! one Arrow batch — and acks (`PutResult`) as the WAL's durable position passes them.
//! It ends like a Zerobus stream (client done, idle, drain, shutdown, a bad batch).

use std::sync::Arc;

use arrow_flight::{FlightData, PutResult};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::conform::Conform;
use super::ipc::{schema_of, Decoded, RawMessage, StreamDecoder};
use super::wire::{batch_offset, ready};
use crate::auth::{Caller, TABLE_HEADER};
use crate::error::{Result, ServerError};
use crate::ingest::acks::{Acks, End};
use crate::ingest::inbound::read_error_status;
use crate::ingest::open::{log_open_frame, table_sink, OpenFrame};
use crate::ingest::run::wait_to_append;
use crate::ingest::signals::{Signal, StreamSignals};
use crate::ingest::stream::idle_end;
use crate::journal::frames::{encode_arrow, RecordFormat, KIND_ARROW};
use crate::journal::streams::LoggedMark;
use crate::limits::StreamSlot;
use crate::pod::Pod;
use crate::sink::SharedSink;

/// Where a Flight stream's answers go.
pub type PutTx = mpsc::Sender<Result<PutResult, Status>>;

/// An opened Flight stream.
struct FlightStream {
    key: u64,
    /// Its logged-LSN mark in the pod's stream registry.
    logged: LoggedMark,
    sink: SharedSink,
    decoder: StreamDecoder,
    conform: Conform,
    /// The `offset_id` the next record batch must carry.
    next_offset: i64,
}

/// Runs one `DoPut` connection to its end.
pub async fn run_put(
    pod: Arc<Pod>,
    caller: Caller,
    header_table: Option<String>,
    mut inbound: Streaming<FlightData>,
    tx: PutTx,
    slot: StreamSlot,
) {
    let first = match inbound.message().await {
        Ok(Some(first)) => first,
        Ok(None) => return,
        Err(e) => {
            if let Some(status) = read_error_status(&e, pod.config.max_message_bytes) {
                let _ = tx.send(Err(status)).await;
            }
            return;
        }
    };
    let mut stream = match open(&pod, &caller, header_table, first).await {
        Ok(s) => s,
        Err(e) => {
            crate::ingest::acks::refuse_open(&tx, e).await;
            return;
        }
    };
    let mut acks = Acks::new(tx, pod.wal.durable_watch()).for_table(stream.sink.name());
    let stream_id = crate::sink::system_columns::stream_id(stream.key);
    tracing::info!(%stream_id, table = stream.sink.name(), "arrow flight stream opened");
    metrics::gauge!("sluice_streams_open").increment(1.0);
    let table_streams =
        metrics::gauge!("sluice_table_streams_open", "table" => stream.sink.name().to_string());
    table_streams.increment(1.0);
    let end = match acks.send(ready()).await {
        Ok(()) => serve(&pod, &mut stream, &mut inbound, &mut acks, &slot).await,
        Err(end) => end,
    };
    acks.finish(end).await;
    pod.streams.closed(stream.key);
    tracing::info!(%stream_id, "arrow flight stream ended");
    metrics::gauge!("sluice_streams_open").decrement(1.0);
    table_streams.decrement(1.0);
}

/// Checks the caller, the table and the stream's schema; logs the stream-open frame.
async fn open(
    pod: &Pod,
    caller: &Caller,
    header_table: Option<String>,
    first: FlightData,
) -> Result<FlightStream> {
    let table = header_table.ok_or_else(|| {
        ServerError::InvalidArgument(format!("DoPut: missing {TABLE_HEADER} header"))
    })?;
    pod.auth.authorize_write(caller, &table)?;
    let sink = table_sink(pod, &table).await?;
    let schema = schema_of(&first.data_header).map_err(|e| {
        ServerError::InvalidArgument(format!(
            "DoPut: the first FlightData must carry the Arrow schema: {e}"
        ))
    })?;
    let target = sink.batch_builder()?.arrow_schema();
    let conform = Conform::new(&sink.schema(), &schema, target).map_err(|e| {
        ServerError::InvalidArgument(format!(
            "DoPut: the Arrow schema does not fit table `{table}`: {e}"
        ))
    })?;
    let OpenFrame { key, logged } = log_open_frame(
        pod,
        &sink,
        RecordFormat::Arrow,
        first.data_header.to_vec(),
        None,
    )
    .await?;
    Ok(FlightStream {
        key,
        logged,
        sink,
        decoder: StreamDecoder::new(Arc::new(schema)),
        conform,
        next_offset: 0,
    })
}

/// Reads, logs and acks the stream's batches until it ends.
async fn serve(
    pod: &Pod,
    stream: &mut FlightStream,
    inbound: &mut Streaming<FlightData>,
    acks: &mut Acks<PutResult>,
    slot: &StreamSlot,
) -> End {
    let limits = &pod.config.limits;
    let mut signals = StreamSignals::for_pod(pod);
    loop {
        if let Err(end) = acks.send_durable().await {
            return end;
        }
        tokio::select! {
            biased;
            signal = signals.next(acks.is_empty()) => match signal {
                Signal::Shutdown | Signal::CloseDeadline => return End::Shutdown,
                Signal::Draining => {
                    let grace = pod.drain_grace();
                    signals.close_in(grace);
                    if let Err(end) = acks.send_close_signal(grace).await {
                        return end;
                    }
                }
                Signal::WalStopped => return acks.wal_stopped().await,
                Signal::Idle => return idle_end(limits.idle_stream_timeout),
                // Not watched by a Flight stream.
                Signal::HoldEnded(_) | Signal::SchemaChanged => {}
            },
            changed = acks.pending_durable_changed() => {
                if let Err(end) = changed {
                    return end;
                }
            }
            message = inbound.message(), if acks.inflight_bytes() <= limits.max_inflight_bytes => match message {
                Ok(Some(data)) => {
                    signals.active();
                    if let Err(e) = take(pod, stream, acks, slot, data).await {
                        return End::from_error(e);
                    }
                }
                Ok(None) => return End::ClientDone,
                Err(e) => {
                    return match read_error_status(&e, pod.config.max_message_bytes) {
                        Some(status) => End::Failed(status),
                        None => End::ClientGone,
                    }
                }
            },
        }
    }
}

/// Takes one `FlightData`: a dictionary batch is kept; a record batch is checked,
/// logged, appended and entered in the ack ledger.
async fn take(
    pod: &Pod,
    stream: &mut FlightStream,
    acks: &mut Acks<PutResult>,
    slot: &StreamSlot,
    data: FlightData,
) -> Result<()> {
    let expected = stream.next_offset;
    let invalid = |what: String| {
        ServerError::InvalidArgument(format!("DoPut: batch offset_id {expected}: {what}"))
    };
    let message = RawMessage {
        header: data.data_header,
        body: data.data_body,
    };
    let batch = match stream.decoder.decode(&message) {
        Ok(Decoded::Dictionary) => return Ok(()),
        Ok(Decoded::Batch(batch)) => batch,
        Err(e) => return Err(invalid(e.to_string())),
    };
    let offset = batch_offset(&data.app_metadata).map_err(invalid)?;
    if offset != expected {
        return Err(ServerError::InvalidArgument(format!(
            "DoPut: offset gap: expected offset_id {expected}, got {offset} \
             (offset_id runs 0, 1, 2, … per connection)"
        )));
    }
    let rows = batch.num_rows();
    let batch = stream.conform.apply(&batch).map_err(|e| {
        invalid(format!(
            "the batch does not fit table `{}`: {e}",
            stream.sink.name()
        ))
    })?;
    let batch =
        stream
            .sink
            .with_system_columns(batch, stream.key, std::iter::repeat_n(offset, rows))?;
    let messages: Vec<&RawMessage> = stream
        .decoder
        .dictionary_messages()
        .chain(std::iter::once(&message))
        .collect();
    let bytes: usize = messages.iter().map(|m| m.header.len() + m.body.len()).sum();
    let payload = encode_arrow(
        stream.key,
        offset,
        rows as u32,
        messages
            .iter()
            .map(|m| (m.header.as_ref(), m.body.as_ref())),
    );
    wait_to_append(pod, &stream.sink, slot, rows, bytes).await;
    let lsn = stream.sink.append(KIND_ARROW, payload, Some(batch)).await?;
    stream.logged.logged(lsn);
    acks.logged_rows(lsn, offset, bytes, rows as u64);
    stream.next_offset += 1;
    Ok(())
}
