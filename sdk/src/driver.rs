//! The connection task of one stream: opens a connection (ephemeral, or persistent
//! create/resume), feeds it from the ledger (filled from the spool when there is one),
//! applies cumulative acks, and reconnects with backoff and jitter when the connection
//! is lost (UNAVAILABLE, a reset transport, …) or the server sends `CloseStreamSignal`
//! (a drain or a rotation: stop sending, wait for the acks of what was sent, move on —
//! no error reaches the caller). On every new connection everything unacked is sent
//! again: an ephemeral stream renumbers its wire offsets from 0; a persistent stream
//! resumes at the server's watermark, pops what it covers and resends the rest with the
//! same offsets (the server drops any it already holds). A refusal the server means
//! (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, …) fails the stream: every waiting
//! ack future gets [`SdkError::Refused`] naming the record at fault when the server did.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sluice_proto::zerobus_client::ZerobusClient;
use sluice_wal::DurableState;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request, Status};

use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::{Result, SdkError};
use crate::ledger::{Entry, Released};
use crate::metrics as m;
use crate::plan::Plan;
use crate::shared::{save_persist, Shared, State};
use crate::wire::{self, Inbound, Opening, Outbound, Records};

/// How long the opening answer may take.
const OPEN_ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a closing stream waits for the server to end the call.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for acks after a `CloseStreamSignal` before reconnecting anyway.
const MAX_ROTATION_WAIT: Duration = Duration::from_secs(60);

type InboundStream = Pin<Box<dyn futures::Stream<Item = Result<Inbound, Status>> + Send>>;

enum End {
    /// The stream was closed with everything acked.
    Closed,
    /// The server asked the client to move on.
    Rotate,
}

pub(crate) enum Fail {
    Retry(String),
    Fatal(SdkError),
}

impl From<SdkError> for Fail {
    fn from(e: SdkError) -> Self {
        match e {
            SdkError::Unavailable(reason) => Fail::Retry(reason),
            e => Fail::Fatal(e),
        }
    }
}

/// Runs the stream until it is closed or fails for good.
pub(crate) async fn run(shared: Arc<Shared>, client: Client, opened: oneshot::Sender<Result<()>>) {
    let mut opened = Some(opened);
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let reconnects = metrics::counter!(m::RECONNECTS, "table" => shared.table.clone());
    loop {
        let mut healthy = false;
        match session(&shared, &client, &mut opened, &mut healthy).await {
            Ok(End::Closed) => break,
            Ok(End::Rotate) => {
                backoff.reset();
                reconnects.increment(1);
                tracing::info!("server asked to move on (CloseStreamSignal); reconnecting");
            }
            Err(Fail::Retry(reason)) => {
                if healthy {
                    backoff.reset();
                }
                reconnects.increment(1);
                let delay = backoff.next_delay();
                tracing::warn!(%reason, ?delay, "stream connection lost; reconnecting");
                tokio::time::sleep(delay).await;
            }
            Err(Fail::Fatal(e)) => {
                tracing::error!(error = %e, "stream failed");
                shared.fail(e.clone());
                if let Some(tx) = opened.take() {
                    let _ = tx.send(Err(e));
                }
                break;
            }
        }
    }
    let mut st = shared.lock();
    let table = shared.table.clone();
    if let Some(p) = st.persist.as_mut() {
        if let Err(e) = save_persist(&table, p, true) {
            tracing::error!(error = %e, "could not save the stream's state file");
        }
    }
    if let Some(spool) = st.spool.as_mut() {
        if let Err(e) = spool.close() {
            tracing::error!(error = %e, "could not close the spool");
        }
    }
}

fn header(value: String) -> Result<MetadataValue<tonic::metadata::Ascii>, Fail> {
    MetadataValue::try_from(value.as_str())
        .map_err(|e| Fail::Fatal(SdkError::Config(format!("header value `{value}`: {e}"))))
}

async fn session(
    shared: &Arc<Shared>,
    client: &Client,
    opened: &mut Option<oneshot::Sender<Result<()>>>,
    healthy: &mut bool,
) -> Result<End, Fail> {
    let token = client.inner.tokens.token().await?;
    let opening = match &shared.lock().persist {
        None => Opening::Ephemeral,
        Some(p) => match &p.stream_id {
            Some(id) => Opening::Resume(id.clone()),
            None => Opening::CreatePersistent,
        },
    };
    let persistent = !matches!(opening, Opening::Ephemeral);
    let (tx, rx) = mpsc::channel::<Outbound>(16);
    let _ = tx
        .send(wire::opening(&shared.table, &shared.format, opening))
        .await;
    let mut grpc = ZerobusClient::new(client.inner.channel.clone());
    let requests = ReceiverStream::new(rx);
    let mut inbound: InboundStream = if persistent {
        let mut req = Request::new(requests.map(wire::persistent));
        add_headers(&mut req, token, &shared.table)?;
        let answer = grpc.persistent_stream(req).await;
        let answer = answer.map_err(|s| refusal(shared, s))?;
        Box::pin(answer.into_inner().map(|r| r.map(Inbound::from)))
    } else {
        let mut req = Request::new(requests.map(wire::ephemeral));
        add_headers(&mut req, token, &shared.table)?;
        let answer = grpc.ephemeral_stream(req).await;
        let answer = answer.map_err(|s| refusal(shared, s))?;
        Box::pin(answer.into_inner().map(|r| r.map(Inbound::from)))
    };
    let first = tokio::time::timeout(OPEN_ANSWER_TIMEOUT, inbound.next())
        .await
        .map_err(|_| Fail::Retry("no answer to the stream's opening".into()))?;
    match first {
        Some(Ok(Inbound::Created(id))) => created(shared, persistent, id)?,
        Some(Ok(Inbound::Resumed(watermark))) => resumed(shared, watermark.unwrap_or(-1))?,
        Some(Ok(other)) => {
            return Err(Fail::Retry(format!("unexpected opening answer {other:?}")));
        }
        Some(Err(status)) => return Err(on_status(shared, client, status).await),
        None => return Err(Fail::Retry("the server ended the stream at once".into())),
    }
    shared.lock().ledger.rewind();
    *healthy = true;
    if let Some(tx) = opened.take() {
        let _ = tx.send(Ok(()));
    }
    let mut durable = shared.lock().spool.as_ref().map(|s| s.wal().subscribe());
    let mut wire_next = 0i64;
    let mut rotate_by: Option<Instant> = None;
    let mut linger: Option<Instant> = None;
    loop {
        let (unsent, done, in_flight) = {
            let mut st = shared.lock();
            refill(shared, &mut st)?;
            let waiting = st.spool.as_ref().map_or(0, |s| s.waiting_bytes());
            (
                st.ledger.unsent() > 0,
                st.closing && st.ledger.is_empty() && waiting == 0,
                st.ledger.in_flight(),
            )
        };
        if done {
            drop(tx);
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
                while let Some(Ok(_)) = inbound.next().await {}
            })
            .await;
            return Ok(End::Closed);
        }
        if rotate_by.is_some() && in_flight == 0 {
            return Ok(End::Rotate);
        }
        tokio::select! {
            permit = tx.reserve(), if unsent && rotate_by.is_none() && linger.is_none() => {
                let Ok(permit) = permit else {
                    return Err(Fail::Retry("the request stream ended".into()));
                };
                match next_request(shared, persistent, &mut wire_next)? {
                    Next::Send(out) => permit.send(out),
                    Next::Linger(until) => linger = Some(until),
                    Next::Nothing => {}
                }
            }
            _ = sleep_until(linger) => linger = None,
            msg = inbound.next() => match msg {
                Some(Ok(Inbound::Ack(w))) => {
                    linger = None;
                    on_ack(shared, w)?;
                }
                Some(Ok(Inbound::Close(d))) => {
                    let wait = d.unwrap_or(MAX_ROTATION_WAIT).min(MAX_ROTATION_WAIT);
                    tracing::info!(?wait, "CloseStreamSignal: waiting for acks, then reconnecting");
                    rotate_by = Some(Instant::now() + wait);
                }
                Some(Ok(_)) => {}
                Some(Err(status)) => return Err(on_status(shared, client, status).await),
                None => return Err(Fail::Retry("the server ended the stream".into())),
            },
            _ = shared.work.notified() => linger = None,
            _ = durable_changed(&mut durable) => linger = None,
            _ = sleep_until(rotate_by) => return Ok(End::Rotate),
        }
    }
}

pub(crate) fn add_headers<T>(
    req: &mut Request<T>,
    token: Option<String>,
    table: &str,
) -> Result<(), Fail> {
    let md = req.metadata_mut();
    if let Some(token) = token {
        md.insert("authorization", header(format!("Bearer {token}"))?);
    }
    md.insert(
        "x-databricks-zerobus-table-name",
        header(table.to_string())?,
    );
    Ok(())
}

async fn durable_changed(rx: &mut Option<watch::Receiver<DurableState>>) {
    if let Some(rx) = rx {
        if rx.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A persistent stream was created: its id is saved before any record is sent, so a
/// crash right after can only resume it, never create a second one.
fn created(shared: &Shared, persistent: bool, id: Option<String>) -> Result<(), Fail> {
    if !persistent {
        return Ok(());
    }
    let Some(id) = id else {
        return Err(Fail::Fatal(SdkError::Refused {
            code: Code::Internal,
            message: "the server created a persistent stream without an id".into(),
            record: None,
        }));
    };
    tracing::info!(stream_id = %id, "created a persistent stream");
    let mut st = shared.lock();
    if let Some(p) = st.persist.as_mut() {
        p.stream_id = Some(id);
        p.plan = Plan::new(-1, p.watermark, shared.limits.persistent_batch());
        p.next_wire = 0;
        save_persist(&shared.table, p, true)?;
    }
    Ok(())
}

/// A persistent stream resumed at request `watermark`: the records its requests carried
/// (the batch plan says which) are acked; requests sent on an earlier connection of this
/// process are resent as they were, and a previous process's plans past the watermark
/// are forgotten (saved before anything is sent).
fn resumed(shared: &Shared, watermark: i64) -> Result<(), Fail> {
    let mut st = shared.lock();
    let Some(p) = st.persist.as_mut() else {
        return Ok(());
    };
    let base = p.plan.base().wire;
    if watermark < base {
        tracing::warn!(
            watermark,
            acked = base,
            "the server resumed below a request it had acked"
        );
    }
    let wire = watermark.max(base);
    let Some(seq) = p.plan.last_seq_of(wire) else {
        return Err(Fail::Fatal(SdkError::State {
            path: p.path.display().to_string(),
            message: format!("its batch plan cannot place request {wire}"),
        }));
    };
    tracing::info!(
        watermark,
        last_record = seq,
        "resumed the persistent stream"
    );
    st.next_seq = st.next_seq.max(seq + 1);
    let released = st.ledger.ack_seq(seq, |_| {});
    let keep = st.ledger.last_assigned_wire().unwrap_or(wire).max(wire);
    apply_release(shared, &mut st, released)?;
    if let Some(p) = st.persist.as_mut() {
        p.plan.forget_after(keep, shared.limits.persistent_batch());
        p.plan.acked(wire);
        p.next_wire = keep + 1;
        p.watermark = p.watermark.max(seq);
        save_persist(&shared.table, p, true)?;
    }
    shared.acks.send_modify(|s| s.acked = s.acked.max(seq));
    shared.room.notify_waiters();
    drop(st);
    tell_callback(shared);
    Ok(())
}

/// Moves spooled records into the ledger while it has room (a persistent stream skips
/// those its watermark covers).
fn refill(shared: &Shared, st: &mut State) -> Result<(), Fail> {
    let State {
        ledger,
        spool,
        persist,
        ..
    } = st;
    let Some(spool) = spool.as_mut() else {
        return Ok(());
    };
    let limits = &shared.limits;
    let records = limits.max_records.saturating_sub(ledger.len());
    let bytes = limits.max_bytes.saturating_sub(ledger.bytes());
    if records == 0 || bytes == 0 || !spool.readable() {
        return Ok(());
    }
    let watermark = persist.as_ref().map_or(i64::MIN, |p| p.watermark);
    let mut any = false;
    for s in spool.read(records, bytes)? {
        any = true;
        if s.seq <= watermark {
            spool.acked(s.lsn_end, false)?;
            continue;
        }
        ledger.push(Entry {
            seq: s.seq,
            wire: crate::ledger::UNASSIGNED,
            payload: s.payload,
            queued: std::time::Instant::now(),
            lsn_end: s.lsn_end,
        });
    }
    if any {
        shared.room.notify_waiters();
    }
    Ok(())
}

/// How long a persistent stream waits for a full request before it sends a short one.
const LINGER: Duration = Duration::from_millis(10);

/// What the connection sends next.
enum Next {
    Send(Outbound),
    /// A persistent stream's short request waits until then for more records.
    Linger(Instant),
    Nothing,
}

/// The next request: an ephemeral stream sends a batch per wire offset of this
/// connection; a persistent one follows its batch plan ([`persistent_request`]).
fn next_request(shared: &Shared, persistent: bool, wire_next: &mut i64) -> Result<Next, Fail> {
    let mut st = shared.lock();
    let limits = &shared.limits;
    let mut bytes = 0usize;
    let mut count = 0usize;
    let mut measure = |e: &Entry| {
        bytes += e.payload.len();
        count += 1;
    };
    let (wire, records) = if persistent {
        let (wire, fresh) = match persistent_request(shared, &mut st)? {
            Planned::Send { wire, fresh } => (wire, fresh),
            Planned::Wait(until) => return Ok(Next::Linger(Instant::from_std(until))),
            Planned::Nothing => return Ok(Next::Nothing),
        };
        let entries = st.ledger.take_request(wire, fresh).inspect(|e| measure(e));
        (
            wire,
            Records::build(&shared.format, entries.map(|e| &e.payload)),
        )
    } else {
        let wire = *wire_next;
        let entries = st
            .ledger
            .take_batch(wire, limits.batch_records, limits.batch_bytes)
            .inspect(|e| measure(e));
        (
            wire,
            Records::build(&shared.format, entries.map(|e| &e.payload)),
        )
    };
    if count == 0 {
        return Ok(Next::Nothing);
    }
    if !persistent {
        *wire_next += 1;
    }
    metrics::counter!(m::RECORDS_SENT, "table" => shared.table.clone()).increment(count as u64);
    metrics::counter!(m::BYTES_SENT, "table" => shared.table.clone()).increment(bytes as u64);
    Ok(Next::Send(Outbound::Records(wire, records)))
}

/// A persistent stream's next request.
enum Planned {
    /// Send request `wire`: the records that carried it before, or the next `fresh`.
    Send {
        wire: i64,
        fresh: Option<usize>,
    },
    /// A short request waits for more records until then.
    Wait(std::time::Instant),
    Nothing,
}

/// A persistent stream's next request: one sent before on this process is resent with
/// the same records; a new one carries what the plan says (no disk write), or — when
/// fewer records are ready after [`LINGER`], at the in-flight or byte limit or at close,
/// or when many more wait than the plan's batch — a cut saved to the state file first.
fn persistent_request(shared: &Shared, st: &mut State) -> Result<Planned, Fail> {
    if let Some(wire) = st.ledger.next_unsent_wire() {
        return Ok(Planned::Send { wire, fresh: None });
    }
    let limits = &shared.limits;
    let at_limit = st.closing
        || st.ledger.len() >= limits.max_records
        || st.ledger.bytes() >= limits.max_bytes;
    let State {
        ledger, persist, ..
    } = st;
    let (Some(p), Some(first), Some(queued)) = (
        persist.as_mut(),
        ledger.next_unsent_seq(),
        ledger.oldest_unsent(),
    ) else {
        return Ok(Planned::Nothing);
    };
    let wire = p.next_wire;
    let Some(planned_end) = p.plan.last_seq_of(wire).filter(|end| *end >= first) else {
        return Err(Fail::Fatal(SdkError::State {
            path: p.path.display().to_string(),
            message: format!("its batch plan is out of step at request {wire} (record {first})"),
        }));
    };
    let full = usize::try_from(planned_end - first + 1).unwrap_or(usize::MAX);
    let target = usize::try_from(limits.persistent_batch()).unwrap_or(1);
    let (ready, by_bytes) = ledger.unsent_fit(full.max(target), limits.batch_bytes);
    let grow = full < target && ready >= 2 * full;
    let n = if ready >= full && !grow {
        full
    } else if grow || by_bytes || at_limit || queued + LINGER <= std::time::Instant::now() {
        // A cut: the following requests hold this many records too.
        let n = ready.max(1);
        p.plan.cut(
            wire,
            first + n as i64 - 1,
            u32::try_from(n).unwrap_or(u32::MAX),
        );
        save_persist(&shared.table, p, true)?;
        n
    } else {
        return Ok(Planned::Wait(queued + LINGER));
    };
    p.next_wire += 1;
    Ok(Planned::Send {
        wire,
        fresh: Some(n),
    })
}

fn on_ack(shared: &Shared, wire: i64) -> Result<(), Fail> {
    let latency = metrics::histogram!(m::ACK_LATENCY, "table" => shared.table.clone());
    let mut st = shared.lock();
    let released = st
        .ledger
        .ack_wire(wire, |e| latency.record(e.queued.elapsed().as_secs_f64()));
    if let Some(p) = st.persist.as_mut() {
        p.plan.acked(wire);
    }
    apply_release(shared, &mut st, released)?;
    drop(st);
    if released.records > 0 {
        tell_callback(shared);
    }
    Ok(())
}

fn apply_release(shared: &Shared, st: &mut State, released: Released) -> Result<(), Fail> {
    let Some(last) = released.last_seq else {
        return Ok(());
    };
    metrics::counter!(m::RECORDS_ACKED, "table" => shared.table.clone())
        .increment(released.records as u64);
    if let Some(spool) = st.spool.as_mut() {
        spool.acked(released.last_lsn, false)?;
    }
    if let Some(p) = st.persist.as_mut() {
        p.watermark = p.watermark.max(last);
        save_persist(&shared.table, p, false)?;
    }
    shared.acks.send_modify(|s| s.acked = s.acked.max(last));
    shared.room.notify_waiters();
    Ok(())
}

/// Tells the ack callback the position, with the stream's lock released (the callback may
/// call back into the stream).
fn tell_callback(shared: &Shared) {
    if let Some(callback) = &shared.on_ack {
        let acked = shared.acks.borrow().acked;
        callback(acked);
    }
}

/// A status that ended a connection: retried, or the stream's final refusal naming the
/// record at fault.
async fn on_status(shared: &Shared, client: &Client, status: Status) -> Fail {
    if status.code() == Code::Unauthenticated {
        client.inner.tokens.invalidate().await;
    }
    refusal(shared, status)
}

fn refusal(shared: &Shared, status: Status) -> Fail {
    let code = status.code();
    let message = status.message().to_string();
    if SdkError::retryable(code) {
        return Fail::Retry(format!("{code:?}: {message}"));
    }
    let record = wire::refused_place(&message)
        .and_then(|(wire, index)| shared.lock().ledger.locate(wire, index));
    Fail::Fatal(SdkError::Refused {
        code,
        message,
        record,
    })
}
