//! Ack futures: one `watch` channel per stream publishes the cumulative ack position
//! ([`AckState`]); an [`AckFuture`] is just an offset and a receiver (no allocation, no
//! per-record channel) and completes once the position passes its offset.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::{Result, SdkError};

/// The stream's cumulative ack position, as every [`AckFuture`] sees it.
#[derive(Debug, Clone)]
pub struct AckState {
    /// Every offset `≤ acked` is durable on the server (or was dropped, see `dropped`).
    pub acked: i64,
    /// Offset ranges `[start, end]` dropped from the full spool (drop-oldest policy).
    pub dropped: Arc<Vec<(i64, i64)>>,
    /// Set once the stream failed for good: unacked records will never be acked.
    pub failed: Option<SdkError>,
}

impl AckState {
    /// Nothing acked yet: offsets start at `first`.
    pub fn starting_at(first: i64) -> Self {
        AckState {
            acked: first - 1,
            dropped: Arc::new(Vec::new()),
            failed: None,
        }
    }

    /// The outcome for `offset`, once it has one.
    fn outcome(&self, offset: i64) -> Option<Result<i64>> {
        if self
            .dropped
            .iter()
            .any(|&(start, end)| (start..=end).contains(&offset))
        {
            return Some(Err(SdkError::Dropped(offset)));
        }
        if self.acked >= offset {
            return Some(Ok(offset));
        }
        self.failed.clone().map(Err)
    }
}

/// Completes with the record's offset once the server acked it as durable, or with the
/// error that ended the stream. Await it (`.await`) or ask [`AckFuture::offset`] and let it
/// go: dropping it does not cancel anything.
#[derive(Debug, Clone)]
pub struct AckFuture {
    offset: i64,
    rx: watch::Receiver<AckState>,
}

impl AckFuture {
    pub(crate) fn new(offset: i64, rx: watch::Receiver<AckState>) -> Self {
        AckFuture { offset, rx }
    }

    /// The record's offset in the stream.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Whether it is acked already (never waits).
    pub fn is_acked(&self) -> bool {
        matches!(self.rx.borrow().outcome(self.offset), Some(Ok(_)))
    }

    async fn wait(mut self) -> Result<i64> {
        loop {
            if let Some(outcome) = self.rx.borrow_and_update().outcome(self.offset) {
                return outcome;
            }
            if self.rx.changed().await.is_err() {
                // The stream's task ended without an outcome for this record.
                return self
                    .rx
                    .borrow()
                    .outcome(self.offset)
                    .unwrap_or(Err(SdkError::Closed));
            }
        }
    }
}

impl IntoFuture for AckFuture {
    type Output = Result<i64>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<i64>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.wait())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn futures_complete_in_order_of_the_cumulative_position() {
        let (tx, rx) = watch::channel(AckState::starting_at(0));
        let a = AckFuture::new(3, rx.clone());
        let b = AckFuture::new(7, rx);
        tx.send_modify(|s| s.acked = 5);
        assert!(a.is_acked() && !b.is_acked());
        assert_eq!(a.await.ok(), Some(3));
        let waiter = tokio::spawn(b.into_future());
        tx.send_modify(|s| s.acked = 7);
        assert_eq!(waiter.await.ok().and_then(|r| r.ok()), Some(7));
    }

    #[tokio::test]
    async fn dropped_and_failed_records_say_so() {
        let (tx, rx) = watch::channel(AckState::starting_at(0));
        tx.send_modify(|s| {
            s.dropped = Arc::new(vec![(2, 4)]);
            s.acked = 9;
        });
        assert!(matches!(
            AckFuture::new(3, rx.clone()).await,
            Err(SdkError::Dropped(3))
        ));
        assert_eq!(AckFuture::new(5, rx.clone()).await.ok(), Some(5));
        tx.send_modify(|s| s.failed = Some(SdkError::Closed));
        assert!(matches!(
            AckFuture::new(10, rx).await,
            Err(SdkError::Closed)
        ));
    }
}
