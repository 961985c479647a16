//! What a stream's read loop waits on besides its requests and its acks: pod
//! shutdown, pod drain and the close deadline a drain sets, a stopped WAL, the
//! idle timeout, and (where the stream watches them) its table's schema changes
//! and the end of a persistent stream's hold.
//!
//! Each wait is armed once per stream and stays armed across the loop's turns.
//! Every source is polled with this struct's own waker, which sets a flag before
//! it wakes the stream's task; a turn looks at the sources only when the flag is
//! up. A `cancelled()`, `changed()` or `sleep_until` made afresh on every turn
//! instead locked the pod-wide tokens' waiter lists twice per request, and
//! re-registered the idle timer (with 5 000 streams of one-record requests, about
//! a tenth of the pod's CPU; README, "A stream's waits armed once").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::task::AtomicWaker;
use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::pod::Pod;
use crate::pstreams::Ending;

/// One reason for a stream's loop to act, besides a request or a durable move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The pod is shutting down.
    Shutdown,
    /// A persistent stream's hold ended (retired, or resumed elsewhere).
    HoldEnded(Ending),
    /// The pod began to drain (reported once).
    Draining,
    /// The close deadline set by [`StreamSignals::close_in`] passed.
    CloseDeadline,
    /// The table's schema changed (reported once per change seen).
    SchemaChanged,
    /// The WAL stopped (reported while nothing awaits its ack).
    WalStopped,
    /// The stream was idle for its timeout (reported while nothing awaits its ack).
    Idle,
}

/// Set by any armed source's wake-up; wakes the stream's task.
#[derive(Default)]
struct Flag {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

type Cancelled = Pin<Box<WaitForCancellationFutureOwned>>;

/// The waits of one stream, armed once (see the module docs).
pub struct StreamSignals {
    flag: Arc<Flag>,
    waker: Waker,
    /// The task waker last registered in `flag`.
    task: Option<Waker>,
    shutdown: Option<Cancelled>,
    draining: Option<Cancelled>,
    wal_stopped: Option<Cancelled>,
    close: Option<Pin<Box<Sleep>>>,
    idle: Pin<Box<Sleep>>,
    /// When the stream is idle for its timeout, as of its last request.
    idle_at: Instant,
    idle_timeout: Duration,
    schema: Option<BoxStream<'static, ()>>,
    hold: Option<BoxFuture<'static, Option<Ending>>>,
    due: Due,
}

/// What fired and is not reported yet (or, for the lasting ones, for good).
#[derive(Default)]
struct Due {
    shutdown: bool,
    hold: Option<Ending>,
    draining: bool,
    close: bool,
    schema: bool,
    wal_stopped: bool,
    idle: bool,
}

impl StreamSignals {
    /// Waits on the pod's `shutdown`, `draining` and `wal_stopped` tokens and an idle
    /// timeout of `idle_timeout` from now.
    pub fn new(
        shutdown: &CancellationToken,
        draining: &CancellationToken,
        wal_stopped: &CancellationToken,
        idle_timeout: Duration,
    ) -> Self {
        let flag = Arc::new(Flag {
            // Up: the first turn arms every source.
            fired: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        let idle_at = Instant::now() + idle_timeout;
        StreamSignals {
            waker: Waker::from(flag.clone()),
            flag,
            task: None,
            shutdown: Some(Box::pin(shutdown.clone().cancelled_owned())),
            draining: Some(Box::pin(draining.clone().cancelled_owned())),
            wal_stopped: Some(Box::pin(wal_stopped.clone().cancelled_owned())),
            close: None,
            idle: Box::pin(tokio::time::sleep_until(idle_at)),
            idle_at,
            idle_timeout,
            schema: None,
            hold: None,
            due: Due::default(),
        }
    }

    /// The waits on `pod`'s tokens and its idle-stream timeout.
    pub fn for_pod(pod: &Pod) -> Self {
        StreamSignals::new(
            &pod.shutdown,
            &pod.draining,
            &pod.wal_stopped,
            pod.config.limits.idle_stream_timeout,
        )
    }

    /// Also reports each change of the table's schema version (`schema`).
    pub fn with_schema(mut self, schema: watch::Receiver<u64>) -> Self {
        self.schema = Some(
            futures::stream::unfold(schema, |mut rx| async move {
                rx.changed().await.ok().map(|()| ((), rx))
            })
            .boxed(),
        );
        self
    }

    /// Also reports the end of a persistent stream's hold (`ended`: why, or None if the
    /// hold can no longer end).
    pub fn with_hold(mut self, ended: BoxFuture<'static, Option<Ending>>) -> Self {
        self.hold = Some(ended);
        self
    }

    /// A request came: the idle timeout runs from now.
    pub fn active(&mut self) {
        self.idle_at = Instant::now() + self.idle_timeout;
        if self.due.idle {
            self.due.idle = false;
            self.idle.as_mut().reset(self.idle_at);
            self.flag.fired.store(true, Ordering::Release);
        }
    }

    /// Reports [`Signal::CloseDeadline`] once `grace` from now has passed.
    pub fn close_in(&mut self, grace: Duration) {
        self.close = Some(Box::pin(tokio::time::sleep(grace)));
        self.flag.fired.store(true, Ordering::Release);
    }

    /// The next signal, by priority (the [`Signal`] variants' order); the WAL's stop and
    /// the idle timeout only while `ledger_empty` (nothing awaits its ack).
    pub async fn next(&mut self, ledger_empty: bool) -> Signal {
        std::future::poll_fn(|cx| self.poll_next(cx, ledger_empty)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>, ledger_empty: bool) -> Poll<Signal> {
        // A plain load first: the flag is another allocation, usually down, and read on
        // every turn of every stream.
        let fired = self.flag.fired.load(Ordering::Acquire)
            && self.flag.fired.swap(false, Ordering::AcqRel);
        let same_task = self.task.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        // The task's waker stays registered until a wake-up takes it (which raises the
        // flag first), so it is registered again only then or for another task
        // (`AtomicWaker::register` on every turn was 3 % of the pod's CPU with 5 000
        // streams). Registered before the sources are polled: a source firing after its
        // poll wakes the task.
        if fired || !same_task {
            self.flag.task.register(cx.waker());
            if !same_task {
                self.task = Some(cx.waker().clone());
            }
        }
        if fired {
            self.poll_sources();
        }
        self.take_due(ledger_empty)
    }

    /// Polls every armed source with the flag's waker and notes what fired.
    fn poll_sources(&mut self) {
        let mut cx = Context::from_waker(&self.waker);
        let due = &mut self.due;
        if ready(&mut self.shutdown, &mut cx) {
            due.shutdown = true;
        }
        if let Some(hold) = &mut self.hold {
            if let Poll::Ready(ended) = hold.as_mut().poll(&mut cx) {
                due.hold = ended;
                self.hold = None;
            }
        }
        if ready(&mut self.draining, &mut cx) {
            due.draining = true;
        }
        if ready(&mut self.close, &mut cx) {
            due.close = true;
        }
        if let Some(schema) = &mut self.schema {
            match schema.poll_next_unpin(&mut cx) {
                Poll::Ready(Some(())) => {
                    due.schema = true;
                    // Armed again for the next change.
                    self.flag.fired.store(true, Ordering::Release);
                }
                Poll::Ready(None) => self.schema = None,
                Poll::Pending => {}
            }
        }
        if ready(&mut self.wal_stopped, &mut cx) {
            due.wal_stopped = true;
        }
        while !due.idle && self.idle.as_mut().poll(&mut cx).is_ready() {
            if self.idle.deadline() >= self.idle_at {
                due.idle = true;
            } else {
                // Requests came since it was set: wait on for the later deadline.
                self.idle.as_mut().reset(self.idle_at);
            }
        }
    }

    fn take_due(&mut self, ledger_empty: bool) -> Poll<Signal> {
        let due = &mut self.due;
        if due.shutdown {
            return Poll::Ready(Signal::Shutdown);
        }
        if let Some(why) = due.hold.take() {
            return Poll::Ready(Signal::HoldEnded(why));
        }
        if std::mem::take(&mut due.draining) {
            return Poll::Ready(Signal::Draining);
        }
        if due.close {
            return Poll::Ready(Signal::CloseDeadline);
        }
        if std::mem::take(&mut due.schema) {
            return Poll::Ready(Signal::SchemaChanged);
        }
        if ledger_empty && due.wal_stopped {
            return Poll::Ready(Signal::WalStopped);
        }
        if ledger_empty && due.idle {
            return Poll::Ready(Signal::Idle);
        }
        Poll::Pending
    }
}

/// Polls a one-shot wait; true (and disarmed) once it fired.
fn ready<F: Future + ?Sized>(wait: &mut Option<Pin<Box<F>>>, cx: &mut Context<'_>) -> bool {
    let fired = wait
        .as_mut()
        .is_some_and(|w| w.as_mut().poll(cx).is_ready());
    if fired {
        *wait = None;
    }
    fired
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    struct Tokens {
        shutdown: CancellationToken,
        draining: CancellationToken,
        wal_stopped: CancellationToken,
    }

    fn signals(idle: Duration) -> (Tokens, StreamSignals) {
        let pod = Tokens {
            shutdown: CancellationToken::new(),
            draining: CancellationToken::new(),
            wal_stopped: CancellationToken::new(),
        };
        let s = StreamSignals::new(&pod.shutdown, &pod.draining, &pod.wal_stopped, idle);
        (pod, s)
    }

    fn now(s: &mut StreamSignals, ledger_empty: bool) -> Option<Signal> {
        s.next(ledger_empty).now_or_never()
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_fired_nothing_reported() {
        let (_pod, mut s) = signals(Duration::from_secs(60));
        assert_eq!(now(&mut s, true), None);
        assert_eq!(now(&mut s, false), None);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wins_over_everything_and_stays() {
        let (pod, mut s) = signals(Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        pod.draining.cancel();
        pod.wal_stopped.cancel();
        pod.shutdown.cancel();
        assert_eq!(now(&mut s, true), Some(Signal::Shutdown));
        assert_eq!(now(&mut s, false), Some(Signal::Shutdown));
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_is_reported_once_then_its_close_deadline_after_the_grace() {
        let (pod, mut s) = signals(Duration::from_secs(600));
        assert_eq!(now(&mut s, false), None);
        pod.draining.cancel();
        // Woken by the token, not polled for it on every turn: the flag must be up.
        assert!(s.flag.fired.load(Ordering::Acquire));
        assert_eq!(now(&mut s, false), Some(Signal::Draining));
        assert_eq!(now(&mut s, false), None, "a drain is reported once");
        s.close_in(Duration::from_secs(5));
        assert_eq!(now(&mut s, false), None);
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(now(&mut s, false), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(s.next(false).await, Signal::CloseDeadline);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_request_and_only_with_nothing_to_ack() {
        let (_pod, mut s) = signals(Duration::from_secs(10));
        assert_eq!(now(&mut s, true), None);
        tokio::time::advance(Duration::from_secs(6)).await;
        s.active();
        tokio::time::advance(Duration::from_secs(6)).await;
        // The first deadline passed, but a request came 6 s ago.
        assert_eq!(now(&mut s, true), None);
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(s.next(true).await, Signal::Idle);
        assert_eq!(now(&mut s, false), None, "not idle while acks are due");
        assert_eq!(now(&mut s, true), Some(Signal::Idle));
        s.active();
        assert_eq!(now(&mut s, true), None, "a request re-arms it");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(s.next(true).await, Signal::Idle);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_wal_is_reported_only_with_nothing_to_ack() {
        let (pod, mut s) = signals(Duration::from_secs(600));
        assert_eq!(now(&mut s, false), None);
        pod.wal_stopped.cancel();
        assert_eq!(now(&mut s, false), None);
        assert_eq!(now(&mut s, true), Some(Signal::WalStopped));
    }

    #[tokio::test(start_paused = true)]
    async fn each_schema_change_is_reported_once() {
        let (tx, rx) = watch::channel(0u64);
        let (_pod, s) = signals(Duration::from_secs(600));
        let mut s = s.with_schema(rx);
        assert_eq!(now(&mut s, false), None);
        tx.send_replace(1);
        assert_eq!(now(&mut s, false), Some(Signal::SchemaChanged));
        assert_eq!(now(&mut s, false), None);
        tx.send_replace(2);
        tx.send_replace(3);
        assert_eq!(now(&mut s, false), Some(Signal::SchemaChanged));
        assert_eq!(
            now(&mut s, false),
            None,
            "changes seen together are one signal"
        );
        drop(tx);
        assert_eq!(now(&mut s, false), None, "a closed watch reports nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_end_is_reported_before_a_drain() {
        let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<Ending>();
        let (pod, s) = signals(Duration::from_secs(600));
        let mut s = s.with_hold(ended_rx.map(Result::ok).boxed());
        assert_eq!(now(&mut s, false), None);
        pod.draining.cancel();
        let _ = ended_tx.send(Ending::Retired);
        assert_eq!(now(&mut s, false), Some(Signal::HoldEnded(Ending::Retired)));
        assert_eq!(now(&mut s, false), Some(Signal::Draining));
        assert_eq!(now(&mut s, false), None);
    }

    /// The next signal the waiter sent, or None if none came within a (paused) second.
    async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Signal>) -> Option<Signal> {
        tokio::time::timeout(Duration::from_secs(1), rx.recv())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_is_woken_again_by_a_later_signal() {
        let (pod, mut s) = signals(Duration::from_secs(600));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let waiter = tokio::spawn(async move {
            loop {
                let signal = s.next(false).await;
                let _ = tx.send(signal);
                if signal == Signal::Shutdown {
                    break;
                }
            }
        });
        tokio::task::yield_now().await;
        pod.draining.cancel();
        assert_eq!(next(&mut rx).await, Some(Signal::Draining));
        tokio::task::yield_now().await;
        pod.shutdown.cancel();
        assert_eq!(
            next(&mut rx).await,
            Some(Signal::Shutdown),
            "the first wake-up took the registered waker; the loop must register it again"
        );
        assert!(waiter.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_waiting_on_it_is_woken_by_a_token() {
        let (pod, mut s) = signals(Duration::from_secs(600));
        let waiter = tokio::spawn(async move { s.next(false).await });
        tokio::task::yield_now().await;
        pod.shutdown.cancel();
        assert_eq!(waiter.await.ok(), Some(Signal::Shutdown));
    }
}
