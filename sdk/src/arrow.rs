//! Arrow streams over Arrow Flight `DoPut` (the server's Flight service, as the official
//! SDKs' `create_arrow_stream` uses it): [`ArrowStreamBuilder`] (from
//! [`StreamBuilder::arrow`]) and [`ArrowStream`] (`send` a `RecordBatch`, `flush`, `close`).
//!
//! Wire: the first message is the schema (IPC), then one record batch per message with
//! `app_metadata` `{"offset_id": n}`, n = 0, 1, 2, … per connection (dictionaries resent
//! before each batch, so every batch stands alone); the server answers `PutResult`s with
//! `{"ack_up_to_offset": n, …}` (-1: ready) and `close_stream_duration_ms` when it wants
//! the producer to move on. An Arrow stream is ephemeral (the server has no persistent
//! Flight mode): a lost connection is reopened with backoff and every unacked batch is
//! sent again, so a batch made durable just before a cut can land twice (at-least-once).
//! Ack futures report batch numbers (0, 1, 2, … for the stream's life).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_flight::encode::{DictionaryHandling, FlightDataEncoderBuilder};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{FlightData, PutResult};
use arrow_schema::SchemaRef;
use futures::{StreamExt, TryStreamExt};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Status};

use crate::acks::{AckFuture, AckState};
use crate::backoff::Backoff;
use crate::client::Client;
use crate::driver::{add_headers, Fail};
use crate::error::{Result, SdkError};
use crate::stream::StreamBuilder;

impl StreamBuilder {
    /// An Arrow stream of `RecordBatch`es with `schema`, over Arrow Flight.
    pub fn arrow(self, schema: SchemaRef) -> ArrowStreamBuilder {
        let (client, table) = self.into_parts();
        ArrowStreamBuilder {
            client,
            table,
            schema,
            max_batches: 64,
            open_timeout: Duration::from_secs(30),
        }
    }
}

/// Configures and opens an Arrow stream (see the module doc).
pub struct ArrowStreamBuilder {
    client: Client,
    table: String,
    schema: SchemaRef,
    max_batches: usize,
    open_timeout: Duration,
}

impl ArrowStreamBuilder {
    /// At most this many batches unacked; `send` waits beyond. Default: 64.
    pub fn max_inflight_batches(mut self, n: usize) -> Self {
        self.max_batches = n.max(1);
        self
    }

    /// How long [`ArrowStreamBuilder::open`] waits for the first connection. Default: 30 s.
    pub fn open_timeout(mut self, timeout: Duration) -> Self {
        self.open_timeout = timeout;
        self
    }

    /// Opens the stream and waits for the server's ready signal.
    pub async fn open(self) -> Result<ArrowStream> {
        let schema_frame = encode(&self.schema, Vec::new())
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| SdkError::InvalidRecord("the schema did not encode".into()))?;
        let (acks, _) = watch::channel(AckState::starting_at(0));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: VecDeque::new(),
                sent: 0,
                next_seq: 0,
                closing: false,
                failed: None,
            }),
            room: Notify::new(),
            work: Notify::new(),
            acks,
            max_batches: self.max_batches,
            table: self.table,
            schema: self.schema,
            schema_frame,
        });
        let (opened_tx, opened_rx) = oneshot::channel();
        let task = tokio::spawn(run(Arc::clone(&shared), self.client, opened_tx));
        let stream = ArrowStream {
            shared,
            task: Some(task),
        };
        match tokio::time::timeout(self.open_timeout, opened_rx).await {
            Ok(Ok(Ok(()))) => Ok(stream),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(SdkError::Closed),
            Err(_) => Err(SdkError::Unavailable(format!(
                "no Flight connection for {} within {:?}",
                stream.shared.table, self.open_timeout
            ))),
        }
    }
}

/// One batch not yet acked: its number and its Flight messages (dictionaries, then the
/// record batch).
struct Pending {
    seq: i64,
    frames: Vec<FlightData>,
}

struct State {
    pending: VecDeque<Pending>,
    /// `pending[..sent]` went out on the current connection.
    sent: usize,
    next_seq: i64,
    closing: bool,
    failed: Option<SdkError>,
}

struct Shared {
    state: Mutex<State>,
    room: Notify,
    work: Notify,
    acks: watch::Sender<AckState>,
    max_batches: usize,
    table: String,
    schema: SchemaRef,
    schema_frame: FlightData,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An open Arrow stream (see the module doc).
pub struct ArrowStream {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

/// The Flight messages of `batches` after the schema's (dictionaries resent with each).
async fn encode(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Result<Vec<FlightData>> {
    FlightDataEncoderBuilder::new()
        .with_schema(schema.clone())
        .with_dictionary_handling(DictionaryHandling::Resend)
        .with_max_flight_data_size(usize::MAX)
        .build(futures::stream::iter(batches.into_iter().map(Ok)))
        .try_collect()
        .await
        .map_err(|e| SdkError::InvalidRecord(format!("the batch does not encode: {e}")))
}

impl ArrowStream {
    /// Admits one batch (its schema must be the stream's), waiting while
    /// `max_inflight_batches` are unacked; the future completes when the server acked it.
    pub async fn send(&self, batch: RecordBatch) -> Result<AckFuture> {
        if batch.schema() != self.shared.schema {
            return Err(SdkError::InvalidRecord(format!(
                "the batch's schema {} is not the stream's {}",
                batch.schema(),
                self.shared.schema
            )));
        }
        let mut frames = encode(&self.shared.schema, vec![batch]).await?;
        frames.remove(0); // the schema, sent once per connection
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut st = self.shared.lock();
                if let Some(e) = &st.failed {
                    return Err(e.clone());
                }
                if st.closing {
                    return Err(SdkError::Closed);
                }
                if st.pending.len() < self.shared.max_batches {
                    let seq = st.next_seq;
                    st.next_seq += 1;
                    st.pending.push_back(Pending { seq, frames });
                    drop(st);
                    self.shared.work.notify_one();
                    return Ok(AckFuture::new(seq, self.shared.acks.subscribe()));
                }
            }
            room.await;
        }
    }

    /// The highest batch number acked so far.
    pub fn acked_offset(&self) -> i64 {
        self.shared.acks.borrow().acked
    }

    /// Waits until every batch sent before the call is acked.
    pub async fn flush(&self) -> Result<()> {
        let last = self.shared.lock().next_seq - 1;
        if last < 0 {
            return Ok(());
        }
        AckFuture::new(last, self.shared.acks.subscribe())
            .await
            .map(|_| ())
    }

    /// Flushes, then ends the connection.
    pub async fn close(mut self) -> Result<()> {
        let flushed = self.flush().await;
        self.shared.lock().closing = true;
        self.shared.work.notify_one();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        flushed
    }
}

impl Drop for ArrowStream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn run(shared: Arc<Shared>, client: Client, opened: oneshot::Sender<Result<()>>) {
    let mut opened = Some(opened);
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        match session(&shared, &client, &mut opened).await {
            Ok(true) => return,
            Ok(false) => backoff.reset(),
            Err(Fail::Retry(reason)) => {
                let delay = backoff.next_delay();
                tracing::warn!(%reason, ?delay, "Flight connection lost; reconnecting");
                tokio::time::sleep(delay).await;
            }
            Err(Fail::Fatal(e)) => {
                tracing::error!(error = %e, "Arrow stream failed");
                shared.lock().failed = Some(e.clone());
                shared.acks.send_modify(|s| s.failed = Some(e.clone()));
                shared.room.notify_waiters();
                if let Some(tx) = opened.take() {
                    let _ = tx.send(Err(e));
                }
                return;
            }
        }
    }
}

fn status_fail(status: Status) -> Fail {
    let code = status.code();
    if SdkError::retryable(code) {
        return Fail::Retry(format!("{code:?}: {}", status.message()));
    }
    Fail::Fatal(SdkError::Refused {
        code,
        message: status.message().to_string(),
        record: None,
    })
}

#[derive(Deserialize)]
struct AckMetadata {
    ack_up_to_offset: i64,
    #[serde(default)]
    close_stream_duration_ms: Option<u64>,
}

/// One connection; `Ok(true)`: closed with everything acked, `Ok(false)`: the server
/// asked to move on and every batch sent was acked.
async fn session(
    shared: &Arc<Shared>,
    client: &Client,
    opened: &mut Option<oneshot::Sender<Result<()>>>,
) -> Result<bool, Fail> {
    let token = client.inner.tokens.token().await.map_err(Fail::from)?;
    let (tx, rx) = mpsc::channel::<FlightData>(16);
    let _ = tx.send(shared.schema_frame.clone()).await;
    let mut req = Request::new(ReceiverStream::new(rx));
    add_headers(&mut req, token, &shared.table)?;
    let mut grpc = FlightServiceClient::new(client.inner.channel.clone())
        .max_encoding_message_size(usize::MAX)
        .max_decoding_message_size(usize::MAX);
    let answer = grpc.do_put(req).await;
    let mut inbound = match answer {
        Ok(a) => a.into_inner(),
        Err(s) => {
            if s.code() == Code::Unauthenticated {
                client.inner.tokens.invalidate().await;
            }
            return Err(status_fail(s));
        }
    };
    let ready = tokio::time::timeout(Duration::from_secs(30), inbound.next())
        .await
        .map_err(|_| Fail::Retry("no ready signal".into()))?;
    match ready {
        Some(Ok(_)) => {}
        Some(Err(s)) => {
            if s.code() == Code::Unauthenticated {
                client.inner.tokens.invalidate().await;
            }
            return Err(status_fail(s));
        }
        None => return Err(Fail::Retry("the server ended the stream at once".into())),
    }
    if let Some(tx) = opened.take() {
        let _ = tx.send(Ok(()));
    }
    // Batch numbers on this connection: offset_id n is batch `base + n`.
    let base = {
        let mut st = shared.lock();
        st.sent = 0;
        st.pending.front().map_or(st.next_seq, |p| p.seq)
    };
    let mut moving_on = false;
    loop {
        let (next, done, in_flight) = {
            let mut st = shared.lock();
            let next = st.pending.get(st.sent).map(|p| {
                let mut frames = p.frames.clone();
                let meta = format!("{{\"offset_id\": {}}}", p.seq - base);
                if let Some(last) = frames.last_mut() {
                    last.app_metadata = meta.into_bytes().into();
                }
                frames
            });
            if next.is_some() && !moving_on {
                st.sent += 1;
            }
            (next, st.closing && st.pending.is_empty(), st.sent)
        };
        if done {
            drop(tx);
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                while let Some(Ok(_)) = inbound.next().await {}
            })
            .await;
            return Ok(true);
        }
        if moving_on && in_flight == 0 {
            return Ok(false);
        }
        if let (Some(frames), false) = (next, moving_on) {
            for f in frames {
                tx.send(f)
                    .await
                    .map_err(|_| Fail::Retry("the request stream ended".into()))?;
            }
            continue;
        }
        tokio::select! {
            msg = inbound.next() => match msg {
                Some(Ok(result)) => moving_on |= on_ack(shared, base, &result),
                Some(Err(s)) => return Err(status_fail(s)),
                None => return Err(Fail::Retry("the server ended the stream".into())),
            },
            _ = shared.work.notified() => {}
        }
    }
}

/// Applies one `PutResult`; true when it asks the producer to move on.
fn on_ack(shared: &Shared, base: i64, result: &PutResult) -> bool {
    let Ok(meta) = serde_json::from_slice::<AckMetadata>(&result.app_metadata) else {
        return false;
    };
    let acked = base + meta.ack_up_to_offset;
    let mut st = shared.lock();
    let mut popped = 0;
    while st.pending.front().is_some_and(|p| p.seq <= acked) {
        st.pending.pop_front();
        popped += 1;
    }
    st.sent = st.sent.saturating_sub(popped);
    drop(st);
    if popped > 0 {
        shared.acks.send_modify(|s| s.acked = s.acked.max(acked));
        shared.room.notify_waiters();
    }
    meta.close_stream_duration_ms.is_some()
}
