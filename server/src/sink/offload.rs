//! Work of the sink that would hold a tokio worker for milliseconds at a time.
//!
//! A flush parses the memtable's deferred runs, fits its batches (over a thousand small ones a
//! second when MQTT devices publish one record each), encodes them as Parquet, then frees them:
//! tens of milliseconds of CPU in one poll. Run on a worker thread, that poll holds the tasks
//! queued behind it on that worker — the WAL's acks, MQTT answers, reads of requests — so
//! each flush showed as a stall of every connection (rest-bench's MQTT stretches, at each
//! flush). [`off_the_workers`] runs such work on a thread of the calling runtime's blocking
//! pool (driving its I/O through that runtime; for a flush, the Delta runtime of
//! `crate::delta_runtime`) and [`drop_off_the_workers`] frees there, so the OS shares the
//! cores between it and the workers.

use std::future::Future;

use crate::error::{Result, ServerError};

/// Runs `work` to completion on a blocking-pool thread and returns its result. If the caller
/// stops waiting, `work` still runs to its end (a flush's files are written, not committed).
pub async fn off_the_workers<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(work))
        .await
        .map_err(|e| ServerError::Internal(format!("sink work off the workers: {e}")))?
}

/// Drops `value` on a blocking-pool thread, not waiting for it: the frees of a memtable's
/// thousands of arrays stay off the workers.
pub fn drop_off_the_workers<T: Send + 'static>(value: T) {
    drop(tokio::task::spawn_blocking(move || drop(value)));
}

#[cfg(test)]
mod tests {
    use super::{drop_off_the_workers, off_the_workers};
    use crate::error::ServerError;

    // A current-thread runtime: its one worker is the test's thread.
    #[tokio::test]
    async fn work_runs_on_another_thread_with_the_runtimes_timers() {
        let worker = std::thread::current().id();
        let ran_on = off_the_workers(async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            Ok(std::thread::current().id())
        })
        .await;
        assert!(matches!(ran_on, Ok(id) if id != worker), "{ran_on:?}");
    }

    #[tokio::test]
    async fn the_works_error_is_returned() {
        let failed: crate::error::Result<()> =
            off_the_workers(async { Err(ServerError::Internal("refused".into())) }).await;
        assert!(matches!(failed, Err(ServerError::Internal(m)) if m == "refused"));
    }

    /// Records the thread it is dropped on.
    struct Dropped(std::sync::mpsc::Sender<std::thread::ThreadId>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }

    #[tokio::test]
    async fn a_value_is_dropped_on_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        drop_off_the_workers(Dropped(tx));
        let on = tokio::task::spawn_blocking(move || rx.recv()).await;
        assert!(
            matches!(on, Ok(Ok(id)) if id != std::thread::current().id()),
            "{on:?}"
        );
    }
}
