//! What a stream tells its producer: the ack ledger (frames logged but not
//! yet acked, and the bytes and rows they hold), cumulative durability acks as
//! the WAL's durable position passes them, `CloseStreamSignal`, and the final
//! status by the way the stream ended. The ledger speaks any wire ([`AckWire`]):
//! `EphemeralStreamResponse`s for Zerobus streams, `PutResult`s for Arrow Flight.

use std::collections::VecDeque;
use std::time::Instant;

use sluice_proto::{
    ephemeral_stream_response, CloseStreamSignal, EphemeralStreamResponse, IngestRecordResponse,
};
use sluice_wal::{DurableWatch, Lsn, WalError};
use tokio::sync::mpsc;
use tonic::Status;

use crate::error::ServerError;

/// Where a stream's responses go.
pub type Tx = mpsc::Sender<Result<EphemeralStreamResponse, Status>>;

/// The two answers a stream gives besides its final status, in one wire's form.
pub trait AckWire: Send + Sized + 'static {
    /// A cumulative durability ack: every record up to `offset` (`records` rows since the
    /// stream opened) is durable.
    fn ack(offset: i64, records: u64) -> Self;
    /// The pod will end the stream in `grace`: stop sending, collect the acks, reconnect
    /// (`last_ack`: the offset and rows of the last ack sent, if any).
    fn close_signal(grace: std::time::Duration, last_ack: Option<(i64, u64)>) -> Self;
}

impl AckWire for EphemeralStreamResponse {
    fn ack(offset: i64, _records: u64) -> Self {
        response(ephemeral_stream_response::Payload::IngestRecordResponse(
            IngestRecordResponse {
                durability_ack_up_to_offset: Some(offset),
            },
        ))
    }

    fn close_signal(grace: std::time::Duration, _last_ack: Option<(i64, u64)>) -> Self {
        close_signal(grace)
    }
}

/// Why a stream's read loop stopped.
pub enum End {
    /// The client finished sending: ack everything, then end OK.
    ClientDone,
    /// The client went away.
    ClientGone,
    /// The pod is shutting down: ack what is durable, then ask to reconnect.
    Shutdown,
    /// A request was bad (or the WAL failed): ack the valid prefix, then fail.
    Failed(Status),
    /// The WAL's disk is full: ack what is durable now and fail at once with
    /// RESOURCE_EXHAUSTED. Records still held by the stalled writer are not waited for:
    /// they become durable (and reach Delta) once space returns, and the producer resends
    /// what it saw unacked (at-least-once, as across any reconnect).
    WalFull(Status),
}

impl End {
    /// How a failed run ends the stream.
    pub fn from_error(e: ServerError) -> End {
        match e {
            ServerError::Wal(WalError::NoSpace { .. }) => End::WalFull(e.to_status()),
            other => End::Failed(other.to_status()),
        }
    }
}

/// A response carrying `payload`.
pub fn response(payload: ephemeral_stream_response::Payload) -> EphemeralStreamResponse {
    EphemeralStreamResponse {
        payload: Some(payload),
    }
}

/// `CloseStreamSignal`: the pod will end this stream in `grace`; the SDK stops sending,
/// waits for its acks and reconnects (through the router, to another pod).
fn close_signal(grace: std::time::Duration) -> EphemeralStreamResponse {
    response(ephemeral_stream_response::Payload::CloseStreamSignal(
        CloseStreamSignal {
            duration: Some(prost_types::Duration {
                seconds: grace.as_secs() as i64,
                nanos: grace.subsec_nanos() as i32,
            }),
        },
    ))
}

/// Counts a stream ended or refused with `status` in `sluice_refusals_total{code}`.
pub fn count_refusal(status: &Status) {
    count_refusal_code(status.code());
}

/// Counts one refusal of any door (streams, REST, OTLP) in `sluice_refusals_total{code}`.
pub fn count_refusal_code(code: tonic::Code) {
    metrics::counter!("sluice_refusals_total", "code" => format!("{code:?}")).increment(1);
}

/// Answers a stream whose opening was refused with `error`'s status, counted in
/// `sluice_streams_rejected_total` and `sluice_refusals_total{code}` (Zerobus, persistent
/// and Flight streams alike).
pub async fn refuse_open<R>(tx: &mpsc::Sender<Result<R, Status>>, error: ServerError) {
    metrics::counter!("sluice_streams_rejected_total").increment(1);
    let status = error.to_status();
    count_refusal(&status);
    let _ = tx.send(Err(status)).await;
}

/// One stream's logged-but-unacked frames and its response channel.
pub struct Acks<R: AckWire = EphemeralStreamResponse> {
    tx: mpsc::Sender<Result<R, Status>>,
    durable: DurableWatch,
    /// `(frame end LSN, last offset in the frame, record bytes, rows logged up to and
    /// including the frame)`, oldest first.
    pending: VecDeque<(Lsn, i64, usize, u64)>,
    /// Record bytes logged but not yet acked (the sum over `pending`).
    inflight_bytes: usize,
    /// Rows logged since the stream opened.
    rows: u64,
    /// The offset and rows of the last ack sent.
    last_ack: Option<(i64, u64)>,
    /// When each pending frame was logged (same order as `pending`).
    logged_at: VecDeque<Instant>,
    /// `sluice_ack_latency_seconds{table}`: frame logged → its ack sent.
    latency: Option<metrics::Histogram>,
}

impl<R: AckWire> Acks<R> {
    /// An empty ledger answering on `tx` as `durable` (the WAL's) moves.
    pub fn new(tx: mpsc::Sender<Result<R, Status>>, durable: DurableWatch) -> Self {
        Acks {
            tx,
            durable,
            pending: VecDeque::new(),
            inflight_bytes: 0,
            rows: 0,
            last_ack: None,
            logged_at: VecDeque::new(),
            latency: None,
        }
    }

    /// Records each frame's ack latency in `sluice_ack_latency_seconds{table}`.
    pub fn for_table(mut self, table: &str) -> Self {
        self.latency = Some(metrics::histogram!(
            "sluice_ack_latency_seconds",
            "table" => table.to_string()
        ));
        self
    }

    /// Records a logged frame ending at `lsn` whose last record has `last_offset`.
    pub fn logged(&mut self, lsn: Lsn, last_offset: i64, record_bytes: usize) {
        self.logged_rows(lsn, last_offset, record_bytes, 0);
    }

    /// [`logged`](Self::logged) for a frame of `rows` rows (acks then count them).
    pub fn logged_rows(&mut self, lsn: Lsn, last_offset: i64, record_bytes: usize, rows: u64) {
        self.rows += rows;
        self.pending
            .push_back((lsn, last_offset, record_bytes, self.rows));
        self.logged_at.push_back(Instant::now());
        self.inflight_bytes += record_bytes;
    }

    /// Sends `message` now (not an ack: a ready signal, say).
    pub async fn send(&self, message: R) -> Result<(), End> {
        self.tx.send(Ok(message)).await.map_err(|_| End::ClientGone)
    }

    /// Record bytes logged but not yet acked.
    pub fn inflight_bytes(&self) -> usize {
        self.inflight_bytes
    }

    /// Whether every logged record is acked.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Waits until the oldest logged frame awaiting its ack is durable (or the WAL failed);
    /// never while the ledger is empty. Every WAL fsync changes the durable state, so a
    /// stream with nothing to ack must not wait on it: each fsync would wake every open
    /// stream of the pod (with 50 000 streams open, that wake-up herd was most of the
    /// pod's CPU). An idle stream learns of a stopped WAL from the pod's `wal_stopped`
    /// token instead (`signals`), and ends with [`wal_stopped`](Self::wal_stopped).
    /// The wait is [`DurableWatch::reached`]: the WAL wakes the stream only once an fsync
    /// covers the frame, not at an fsync of a batch before it.
    pub async fn pending_durable_changed(&mut self) -> Result<(), End> {
        let Some(&(oldest, ..)) = self.pending.front() else {
            return std::future::pending().await;
        };
        self.durable
            .reached(oldest)
            .await
            .map_err(|_| End::Failed(Status::unavailable("write-ahead log stopped")))
    }

    /// How a stream with nothing to ack ends when the WAL stopped: the status of a
    /// failed WAL (its reason), else UNAVAILABLE.
    pub async fn wal_stopped(&mut self) -> End {
        match self.send_durable().await {
            Err(end) => end,
            Ok(()) => End::Failed(Status::unavailable("write-ahead log stopped")),
        }
    }

    /// Sends `CloseStreamSignal` with `grace`.
    pub async fn send_close_signal(&self, grace: std::time::Duration) -> Result<(), End> {
        self.send(R::close_signal(grace, self.last_ack)).await
    }

    /// Sends one cumulative ack for everything now durable.
    pub async fn send_durable(&mut self) -> Result<(), End> {
        let state = self.durable.borrow().clone();
        if let Some(reason) = state.failed {
            return Err(End::Failed(Status::unavailable(format!(
                "write-ahead log failed on this pod ({reason}); records not acked must be resent"
            ))));
        }
        let mut top = None;
        while let Some(&(lsn, offset, bytes, rows)) = self.pending.front() {
            if lsn > state.durable {
                break;
            }
            // Max: a resent record's ack (LSN 0) may sit behind newer frames.
            top = top.max(Some((offset, rows)));
            self.inflight_bytes = self.inflight_bytes.saturating_sub(bytes);
            self.pending.pop_front();
            if let (Some(at), Some(h)) = (self.logged_at.pop_front(), &self.latency) {
                h.record(at.elapsed().as_secs_f64());
            }
        }
        match top {
            Some((offset, rows)) => {
                self.last_ack = Some((offset, rows));
                self.send(R::ack(offset, rows)).await
            }
            None => Ok(()),
        }
    }

    /// Waits until every logged record is durable and acked.
    async fn drain(&mut self) -> Result<(), End> {
        while !self.pending.is_empty() {
            self.send_durable().await?;
            if self.pending.is_empty() {
                break;
            }
            // Woken once the oldest frame is durable, not at every fsync before it.
            self.pending_durable_changed().await?;
        }
        Ok(())
    }

    /// Ends the stream: acks what `end` calls for, then sends its last word.
    pub async fn finish(&mut self, end: End) {
        let end = match end {
            End::ClientGone => return,
            End::WalFull(status) => match self.send_durable().await {
                Ok(()) => End::Failed(status),
                Err(e) => e,
            },
            other => match self.drain().await {
                Ok(()) => other,
                Err(e) => e,
            },
        };
        match end {
            End::ClientDone | End::ClientGone => {}
            End::Shutdown => {
                let _ = self.send_close_signal(std::time::Duration::ZERO).await;
                let _ = self
                    .tx
                    .send(Err(Status::unavailable(
                        "this pod is shutting down; reconnect to continue",
                    )))
                    .await;
            }
            End::Failed(status) | End::WalFull(status) => {
                count_refusal(&status);
                let _ = self.tx.send(Err(status)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use sluice_wal::{durable_channel, DurablePublisher, DurableState};

    type Rx = mpsc::Receiver<Result<EphemeralStreamResponse, Status>>;

    fn durable_at(durable: Lsn) -> DurableState {
        DurableState {
            durable,
            failed: None,
        }
    }

    fn ledger() -> (Acks, DurablePublisher, Rx) {
        let (tx, rx) = mpsc::channel(16);
        let (wal, durable) = durable_channel(durable_at(0));
        (Acks::new(tx, durable), wal, rx)
    }

    /// The offset an ack response carries.
    fn acked(response: Option<Result<EphemeralStreamResponse, Status>>) -> Option<i64> {
        match response?.ok()?.payload? {
            ephemeral_stream_response::Payload::IngestRecordResponse(r) => {
                r.durability_ack_up_to_offset
            }
            _ => None,
        }
    }

    #[tokio::test]
    async fn one_cumulative_ack_for_every_frame_now_durable() {
        let (mut acks, wal, mut rx) = ledger();
        acks.logged(10, 4, 100);
        acks.logged(20, 9, 50);
        acks.logged(30, 12, 7);
        assert_eq!(acks.inflight_bytes(), 157);
        assert!(acks.send_durable().await.is_ok());
        assert!(rx.try_recv().is_err(), "nothing durable, nothing acked");
        wal.publish(durable_at(25));
        assert!(acks.send_durable().await.is_ok());
        assert_eq!(acked(rx.try_recv().ok()), Some(9));
        assert!(rx.try_recv().is_err(), "one ack for both frames");
        assert_eq!(acks.inflight_bytes(), 7);
        assert!(!acks.is_empty());
        wal.publish(durable_at(30));
        assert!(acks.send_durable().await.is_ok());
        assert_eq!(acked(rx.try_recv().ok()), Some(12));
        assert!(acks.is_empty());
        assert_eq!(acks.inflight_bytes(), 0);
    }

    #[tokio::test]
    async fn a_stream_waits_for_its_oldest_frame_not_for_every_fsync() {
        use futures::FutureExt;
        let (mut acks, wal, mut rx) = ledger();
        assert!(acks.send_durable().await.is_ok());
        wal.publish(durable_at(5));
        assert!(
            acks.pending_durable_changed().now_or_never().is_none(),
            "an empty ledger waits on no fsync"
        );
        acks.logged(10, 0, 1);
        acks.logged(20, 1, 1);
        assert!(
            acks.pending_durable_changed().now_or_never().is_none(),
            "the durable state moved, but not to the oldest frame"
        );
        wal.publish(durable_at(9));
        assert!(
            acks.pending_durable_changed().now_or_never().is_none(),
            "an fsync short of the oldest frame keeps the wait going"
        );
        wal.publish(durable_at(10));
        assert!(matches!(
            acks.pending_durable_changed().now_or_never(),
            Some(Ok(()))
        ));
        assert!(acks.send_durable().await.is_ok());
        assert_eq!(acked(rx.try_recv().ok()), Some(0));
        assert!(acks.pending_durable_changed().now_or_never().is_none());
        // A failed WAL ends the wait; the ledger's next step reports it.
        wal.publish(DurableState {
            durable: 10,
            failed: Some("EIO".into()),
        });
        assert!(matches!(
            acks.pending_durable_changed().now_or_never(),
            Some(Ok(()))
        ));
        assert!(acks.send_durable().await.is_err());
        // A stopped WAL ends it too.
        let (mut acks, wal, _rx) = ledger();
        acks.logged(10, 0, 1);
        drop(wal);
        assert!(matches!(
            acks.pending_durable_changed().now_or_never(),
            Some(Err(End::Failed(_)))
        ));
    }

    #[tokio::test]
    async fn an_idle_stream_ends_unavailable_when_the_wal_fails() {
        use futures::FutureExt;
        let (mut acks, wal, _rx) = ledger();
        assert!(acks.send_durable().await.is_ok());
        wal.publish(DurableState {
            durable: 0,
            failed: Some("EIO".into()),
        });
        match acks.wal_stopped().now_or_never() {
            Some(End::Failed(status)) => {
                assert_eq!(status.code(), tonic::Code::Unavailable);
                assert!(status.message().contains("EIO"), "{status:?}");
            }
            _ => panic!("an idle stream must end when the WAL fails"),
        }
    }

    #[tokio::test]
    async fn an_idle_stream_ends_unavailable_when_the_wal_closes() {
        use futures::FutureExt;
        let (mut acks, _wal, _rx) = ledger();
        match acks.wal_stopped().now_or_never() {
            Some(End::Failed(status)) => {
                assert_eq!(status.code(), tonic::Code::Unavailable);
                assert!(status.message().contains("stopped"), "{status:?}");
            }
            _ => panic!("an idle stream must end when the WAL closes"),
        }
    }

    #[tokio::test]
    async fn a_failed_wal_fails_the_stream_unavailable() {
        let (mut acks, wal, mut rx) = ledger();
        acks.logged(10, 0, 1);
        wal.publish(DurableState {
            durable: 10,
            failed: Some(Arc::from("disk gone")),
        });
        match acks.send_durable().await {
            Err(End::Failed(s)) => {
                assert_eq!(s.code(), tonic::Code::Unavailable);
                assert!(s.message().contains("disk gone"), "{}", s.message());
            }
            _ => panic!("expected End::Failed"),
        }
        assert!(rx.try_recv().is_err(), "nothing acked from a failed WAL");
    }

    #[tokio::test]
    async fn finishing_after_a_bad_request_acks_the_valid_prefix_then_fails() {
        let (mut acks, wal, mut rx) = ledger();
        acks.logged(10, 3, 1);
        let durable_later = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            wal.publish(durable_at(10));
            wal
        });
        acks.finish(End::Failed(Status::invalid_argument("bad")))
            .await;
        assert_eq!(acked(rx.recv().await), Some(3));
        match rx.recv().await {
            Some(Err(s)) => assert_eq!(s.code(), tonic::Code::InvalidArgument),
            other => panic!("expected the request's status, got {other:?}"),
        }
        assert!(durable_later.await.is_ok());
    }

    #[tokio::test]
    async fn finishing_on_a_full_disk_does_not_wait_for_durability() {
        let (mut acks, _wal, mut rx) = ledger();
        acks.logged(10, 3, 1);
        acks.finish(End::WalFull(Status::resource_exhausted("disk full")))
            .await;
        match rx.recv().await {
            Some(Err(s)) => assert_eq!(s.code(), tonic::Code::ResourceExhausted),
            other => panic!("expected RESOURCE_EXHAUSTED at once, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn shutdown_asks_the_client_to_reconnect_now() {
        let (mut acks, _wal, mut rx) = ledger();
        acks.finish(End::Shutdown).await;
        match rx.recv().await.and_then(|r| r.ok()).and_then(|r| r.payload) {
            Some(ephemeral_stream_response::Payload::CloseStreamSignal(s)) => {
                assert_eq!(s.duration.map(|d| (d.seconds, d.nanos)), Some((0, 0)));
            }
            other => panic!("expected CloseStreamSignal, got {other:?}"),
        }
        match rx.recv().await {
            Some(Err(s)) => assert_eq!(s.code(), tonic::Code::Unavailable),
            other => panic!("expected UNAVAILABLE, got {other:?}"),
        }
    }
}
