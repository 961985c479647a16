//! One producer stream's select loop: opens the stream, then reads runs of
//! requests (see `run`), sends cumulative durability acks as the WAL's
//! durable position moves (see `acks`), and ends on client close, idle
//! timeout, drain, shutdown, or — for a persistent stream — when it is
//! retired or resumed on another connection.
//!
//! Back-pressure: the stream is not read while too many record bytes await
//! their ack, nor while a run waits for room (memtable, pace, the WAL's
//! queue: the sink's `append` waits), so HTTP/2 flow control pushes back.

use std::sync::Arc;

use sluice_proto::{
    ephemeral_stream_request, ephemeral_stream_response, CreateIngestStreamResponse,
    EphemeralStreamRequest,
};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::acks::{response, Acks, End, Tx};
use super::inbound::{read_error_status, Inbound};
use super::open::{open_stream, OpenedStream};
use super::run::{gather, process_run};
use super::signals::{Signal, StreamSignals};
use crate::auth::Caller;
use crate::limits::StreamSlot;
use crate::pod::Pod;
use crate::pstreams::{Attached, Ending};

/// How a stream idle for `timeout` (with nothing to ack) ends.
pub(crate) fn idle_end(timeout: std::time::Duration) -> End {
    End::Failed(Status::unavailable(format!(
        "stream idle for {timeout:?} (--idle-stream-timeout); closed, reconnect to continue"
    )))
}

/// Reads a stream's opening request; on a read error, tells the client (if
/// it is still there) on `tx` and returns None.
pub async fn first_message<M, R>(
    pod: &Pod,
    inbound: &mut Streaming<M>,
    tx: &mpsc::Sender<Result<R, Status>>,
) -> Option<M> {
    match inbound.message().await {
        Ok(m) => m,
        Err(e) => {
            if let Some(status) = read_error_status(&e, pod.config.max_message_bytes) {
                let _ = tx.send(Err(status)).await;
            }
            None
        }
    }
}

/// Runs one ephemeral stream to its end.
pub async fn run_stream(
    pod: Arc<Pod>,
    caller: Caller,
    header_table: Option<String>,
    mut inbound: Streaming<EphemeralStreamRequest>,
    tx: Tx,
    slot: StreamSlot,
) {
    let Some(first) = first_message(&pod, &mut inbound, &tx).await else {
        return;
    };
    let create = match first.payload {
        Some(ephemeral_stream_request::Payload::CreateStream(c)) => c,
        _ => {
            let _ = tx
                .send(Err(Status::failed_precondition(
                    "the first message of a stream must be create_stream",
                )))
                .await;
            return;
        }
    };
    let opened = match open_stream(&pod, &caller, header_table.as_deref(), create).await {
        Ok(o) => o,
        Err(e) => {
            crate::ingest::acks::refuse_open(&tx, e).await;
            return;
        }
    };
    let created = response(ephemeral_stream_response::Payload::CreateStreamResponse(
        CreateIngestStreamResponse {
            stream_id: Some(opened.stream_id.clone()),
        },
    ));
    if tx.send(Ok(created)).await.is_ok() {
        serve_opened(&pod, opened, inbound, tx, slot, None).await;
    } else {
        pod.streams.closed(opened.key);
    }
}

/// Serves an opened stream whose opening answer was sent: reads, logs and
/// acks its records until it ends (`attached`: a persistent stream's hold).
pub async fn serve_opened(
    pod: &Pod,
    opened: OpenedStream,
    mut inbound: impl Inbound,
    tx: Tx,
    slot: StreamSlot,
    attached: Option<Attached>,
) {
    tracing::info!(stream_id = %opened.stream_id, table = opened.sink.name(), persistent = opened.persistent.is_some(), "stream opened");
    metrics::gauge!("sluice_streams_open").increment(1.0);
    let table_streams =
        metrics::gauge!("sluice_table_streams_open", "table" => opened.sink.name().to_string());
    table_streams.increment(1.0);
    let mut state = StreamState {
        pod,
        acks: Acks::new(tx, pod.wal.durable_watch()).for_table(opened.sink.name()),
        opened,
        slot,
        attached,
    };
    let end = state.serve(&mut inbound).await;
    state.acks.finish(end).await;
    pod.streams.closed(state.opened.key);
    tracing::info!(stream_id = %state.opened.stream_id, "stream ended");
    metrics::gauge!("sluice_streams_open").decrement(1.0);
    table_streams.decrement(1.0);
}

struct StreamState<'p> {
    pod: &'p Pod,
    opened: OpenedStream,
    acks: Acks,
    /// The stream's slot (freed when the stream ends); paces the principal.
    slot: StreamSlot,
    /// A persistent stream's hold (released when the stream ends).
    attached: Option<Attached>,
}

impl StreamState<'_> {
    async fn serve(&mut self, inbound: &mut impl Inbound) -> End {
        let pod = self.pod;
        let limits = &pod.config.limits;
        let mut signals = StreamSignals::for_pod(pod).with_schema(self.opened.sink.watch_schema());
        if let Some(attached) = &self.attached {
            signals = signals.with_hold(attached.ended());
        }
        // Requests in the previous run: the next run's list is sized for as many.
        let mut last_run = 1;
        loop {
            if let Err(end) = self.acks.send_durable().await {
                return end;
            }
            tokio::select! {
                biased;
                signal = signals.next(self.acks.is_empty()) => match signal {
                    Signal::Shutdown | Signal::CloseDeadline => return End::Shutdown,
                    Signal::HoldEnded(why) => return self.hold_lost(why).await,
                    Signal::Draining => {
                        // The stream keeps reading and acking until the client moves
                        // away or the grace passes.
                        let grace = pod.drain_grace();
                        signals.close_in(grace);
                        if let Err(end) = self.acks.send_close_signal(grace).await {
                            return end;
                        }
                    }
                    Signal::SchemaChanged => {
                        if let Some(column) = self.column_gone() {
                            return self.schema_broken(&column).await;
                        }
                    }
                    Signal::WalStopped => return self.acks.wal_stopped().await,
                    Signal::Idle => return idle_end(limits.idle_stream_timeout),
                },
                changed = self.acks.pending_durable_changed() => {
                    if let Err(end) = changed {
                        return end;
                    }
                }
                // Back-pressure: read no more while too much awaits its ack.
                message = inbound.next_request(), if self.acks.inflight_bytes() <= limits.max_inflight_bytes => match message {
                    Ok(Some(first)) => {
                        signals.active();
                        let (run, read_error) = gather(first, inbound, last_run);
                        last_run = run.requests.len();
                        if let Err(e) = process_run(pod, &mut self.opened, &self.slot, &mut self.acks, run).await {
                            return End::from_error(e);
                        }
                        // An over-size or undecodable request right after the
                        // run: the run is logged (and acked), then its status.
                        if let Some(e) = read_error {
                            return self.read_failed(&e);
                        }
                    }
                    Ok(None) => return End::ClientDone,
                    Err(e) => return self.read_failed(&e),
                },
            }
        }
    }

    /// A persistent stream retired, or resumed on another connection: `CloseStreamSignal`
    /// now, then (after the acks) the status saying why.
    async fn hold_lost(&self, why: Ending) -> End {
        if let Err(end) = self.acks.send_close_signal(std::time::Duration::ZERO).await {
            return end;
        }
        let id = &self.opened.stream_id;
        End::Failed(match why {
            Ending::Retired => Status::failed_precondition(format!(
                "persistent stream `{id}` was retired; it never resumes"
            )),
            Ending::Resumed => Status::aborted(format!(
                "persistent stream `{id}` was resumed on another connection; this one ends"
            )),
        })
    }

    /// A top-level column this stream can write that the table no longer
    /// has under that name (dropped or renamed by `sluice table alter`). A
    /// widened column is not one: the stream's rows are cast when flushed.
    fn column_gone(&self) -> Option<String> {
        let now = self.opened.sink.schema();
        self.opened
            .built_for
            .columns
            .iter()
            .filter(|c| self.opened.parser.writes_column(&c.name))
            .find(|c| {
                !now.columns
                    .iter()
                    .any(|n| n.name.eq_ignore_ascii_case(&c.name))
            })
            .map(|c| c.name.clone())
    }

    /// The table dropped or renamed `column`, which this stream writes:
    /// `CloseStreamSignal` now, then (after the acks of what it sent) the
    /// status naming the column; the client fetches the schema and reopens.
    async fn schema_broken(&self, column: &str) -> End {
        tracing::info!(stream_id = %self.opened.stream_id, table = self.opened.sink.name(), column, "stream ended: the table no longer has a column it writes");
        if let Err(end) = self.acks.send_close_signal(std::time::Duration::ZERO).await {
            return end;
        }
        End::Failed(Status::failed_precondition(format!(
            "table {} was altered: column `{column}`, which this stream writes, was dropped or \
             renamed; records acked so far are kept; fetch the table's schema and open a new \
             stream",
            self.opened.sink.name()
        )))
    }

    /// How a failed read ends the stream.
    fn read_failed(&self, e: &Status) -> End {
        match read_error_status(e, self.pod.config.max_message_bytes) {
            Some(status) => End::Failed(status),
            None => End::ClientGone,
        }
    }
}
