//! The pod's second tokio runtime, for the work that moves rows into Delta: each table's
//! flush loop and committer.
//!
//! That work is a chain of short steps, each awaiting the one before: the WAL's durable
//! point, the Parquet files, the log listing and reads of a reload, the commit file, the
//! snapshot update after it. deltalake runs its log reads as tasks spawned on the runtime
//! it is called from, and object_store's local files answer from the blocking pool; either
//! way each step's wake-up waits in the queue of tasks ready for a worker. On the ingest
//! runtime those are the streams' tasks, each poll a run of requests (milliseconds at 1 KiB
//! records). Under a closed-loop 1 KiB load (`trunk-bench`, ~310 MB/s, three commits a
//! second; the committer's frames 0.3 % of the pod's perf samples, all deltalake and
//! kernel frames outside Parquet encoding 3.6 %) the committer's commit lag had p99
//! 0.71–0.79 s and the pod's own freshness p99 was 1.83 s (the README's
//! issue-16 section has the figures with this runtime). On a runtime of its own the steps
//! wait only for each other, and the OS shares the cores between the two runtimes' threads.
//!
//! Its threads keep the default scheduling policy. Tried on a 2-core host and not kept:
//! nice 5 (the 1 KiB closed loop's freshness p99 went back to 1.36 and 2.17 s: under saturation
//! the flushes got too little of the cores) and `SCHED_BATCH`, no wake-up preemption (the
//! 200 B half-rate ack p99 was not lower: 29.7–68.4 ms over four runs).
//!
//! Built at first use with one worker thread per two cores (at least one), named
//! `sluice-delta`; the heavy parts of a flush (parsing deferred runs, Parquet encoding) run
//! on its blocking pool (`sink::offload`), compaction stays on the ingest runtime. If the
//! runtime cannot be built, the work stays on the runtime it is spawned from.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};

/// Name of the Delta runtime's threads.
pub const THREAD_NAME: &str = "sluice-delta";

static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();

/// Worker threads for `cores` cores: one per two, at least one.
fn workers(cores: usize) -> usize {
    (cores / 2).max(1)
}

/// The Delta runtime, or the current one if it could not be built.
pub fn handle() -> Handle {
    let runtime = RUNTIME.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers(cores))
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()
        {
            Ok(runtime) => Some(runtime),
            Err(e) => {
                tracing::warn!(
                    "the Delta runtime could not be built ({e}); flushes and commits share \
                     the ingest runtime"
                );
                None
            }
        }
    });
    match runtime {
        Some(runtime) => runtime.handle().clone(),
        None => Handle::current(),
    }
}

/// Spawns `work` on the Delta runtime.
pub fn spawn<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    handle().spawn(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_per_two_cores_and_at_least_one() {
        assert_eq!(workers(1), 1);
        assert_eq!(workers(2), 1);
        assert_eq!(workers(3), 1);
        assert_eq!(workers(8), 4);
    }

    // A current-thread runtime: its one thread is the test's.
    #[tokio::test]
    async fn work_runs_on_the_delta_runtimes_threads_with_their_timers() {
        let on = spawn(async {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            std::thread::current().name().map(str::to_string)
        })
        .await;
        assert_eq!(on.ok().flatten().as_deref(), Some(THREAD_NAME));
    }
}
