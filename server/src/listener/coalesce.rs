//! [`Coalesce`]: a connection's socket whose writes wait for one turn of the scheduler, so
//! the responses that other ready tasks are about to hand the connection leave in the same
//! system call.
//!
//! Why: after a WAL group commit, hundreds of streams of one HTTP/2 connection each send an
//! ack. Each stream's task wakes the connection's task, which (run next, from tokio's LIFO
//! slot) wrote out whatever had been queued so far: with 5 000 streams of one-record
//! requests on 5 connections, ~9 200 `writev` calls a second for 50 000 acks, and the
//! loopback send path under them was ~8 % of the pod's CPU samples.
//!
//! How: the first write of a burst wakes the task and answers `Pending`. A task that wakes
//! itself goes to the back of its worker's run queue, so every task already ready runs
//! before the connection is polled again; the write then goes through with all their frames.
//! The burst ends at the next flush, which h2 and hyper's HTTP/1.1 both call once their
//! buffer is out. A lone response waits one scheduler turn (microseconds); reads pass
//! through untouched.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};

/// `inner` with its writes held for one scheduler turn per burst (module doc).
pub struct Coalesce<I> {
    inner: I,
    /// The current burst has had its turn.
    yielded: bool,
}

impl<I> Coalesce<I> {
    /// Wraps `inner`.
    pub fn new(inner: I) -> Self {
        Coalesce {
            inner,
            yielded: false,
        }
    }

    /// `true` if the write may go now; otherwise the task is woken to come back after the
    /// tasks already ready.
    fn take_turn(&mut self, cx: &mut Context<'_>) -> bool {
        if self.yielded {
            return true;
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        false
    }
}

impl<I: Read + Unpin> Read for Coalesce<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: Write + Unpin> Write for Coalesce<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.take_turn(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !self.take_turn(cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            self.yielded = false;
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use hyper_util::rt::TokioIo;
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A waker that counts its wakes.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn each_burst_waits_one_turn_then_writes_through_to_its_flush() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut io = Coalesce::new(TokioIo::new(near));
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let wakes = || counter.0.load(Ordering::SeqCst);

        // The burst's first write waits, and the task is woken to come back.
        assert!(Pin::new(&mut io).poll_write(&mut cx, b"ab").is_pending());
        assert_eq!(wakes(), 1);
        // Back again: it goes through, and so does the rest of the burst.
        assert!(matches!(
            Pin::new(&mut io).poll_write(&mut cx, b"ab"),
            Poll::Ready(Ok(2))
        ));
        let slices = [IoSlice::new(b"c"), IoSlice::new(b"d")];
        assert!(matches!(
            Pin::new(&mut io).poll_write_vectored(&mut cx, &slices),
            Poll::Ready(Ok(2))
        ));
        assert_eq!(wakes(), 1);
        assert!(matches!(
            Pin::new(&mut io).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        // The flush ended the burst: the next one waits its turn again.
        assert!(Pin::new(&mut io)
            .poll_write_vectored(&mut cx, &[IoSlice::new(b"ef")])
            .is_pending());
        assert_eq!(wakes(), 2);
        assert!(matches!(
            Pin::new(&mut io).poll_write_vectored(&mut cx, &[IoSlice::new(b"ef")]),
            Poll::Ready(Ok(2))
        ));
        assert!(io.is_write_vectored());
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready());

        let mut received = String::new();
        far.read_to_string(&mut received)
            .await
            .expect("the far end reads");
        assert_eq!(received, "abcdef");
    }
}
