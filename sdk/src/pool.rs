//! [`StreamPool`]: one table's records spread over N streams for throughput (each stream
//! is one HTTP/2 call the server serves on its own; one stream is bounded by the server's
//! per-stream rate). Records are handed out round-robin; order holds within each stream,
//! not across the pool. A persistent or spooled pool gives stream `i` the state file
//! `FILE.i` and the spool directory `DIR/i`.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use crate::acks::AckFuture;
use crate::error::{Result, SdkError};
use crate::stream::{Stream, StreamBuilder};

/// A record's place in a pool: which stream carries it and its ack.
#[derive(Debug)]
pub struct PoolAck {
    /// The index of the stream in the pool.
    pub stream: usize,
    /// The record's ack (its offset is within that stream).
    pub ack: AckFuture,
}

/// N streams to one table (see the module doc).
pub struct StreamPool {
    streams: Vec<Stream>,
    next: AtomicUsize,
}

impl StreamBuilder {
    /// Opens `n` streams configured like this one as a [`StreamPool`].
    pub async fn open_pool(self, n: usize) -> Result<StreamPool> {
        if n == 0 {
            return Err(SdkError::Config(
                "a stream pool needs at least one stream".into(),
            ));
        }
        let mut streams = Vec::with_capacity(n);
        for i in 0..n {
            streams.push(self.clone().suffixed(&format!(".{i}")).open().await?);
        }
        Ok(StreamPool {
            streams,
            next: AtomicUsize::new(0),
        })
    }
}

impl StreamPool {
    /// The streams.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// Sends on the next stream in turn, waiting while it is full.
    pub async fn send(&self, record: impl Into<Bytes>) -> Result<PoolAck> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.streams.len();
        let ack = self.streams[i].send(record).await?;
        Ok(PoolAck { stream: i, ack })
    }

    /// Sends on the first stream, in turn, that has room now; [`SdkError::Full`] when none
    /// has.
    pub fn try_send(&self, record: impl Into<Bytes>) -> Result<PoolAck> {
        let record = record.into();
        let n = self.streams.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..n {
            let i = (start + k) % n;
            match self.streams[i].try_send(record.clone()) {
                Ok(ack) => return Ok(PoolAck { stream: i, ack }),
                Err(SdkError::Full) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(SdkError::Full)
    }

    /// Waits until every record sent before the call is acked on every stream.
    pub async fn flush(&self) -> Result<()> {
        for r in futures::future::join_all(self.streams.iter().map(Stream::flush)).await {
            r?;
        }
        Ok(())
    }

    /// Closes every stream; the first error, if any.
    pub async fn close(self) -> Result<()> {
        let mut first = Ok(());
        for r in futures::future::join_all(self.streams.into_iter().map(Stream::close)).await {
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
