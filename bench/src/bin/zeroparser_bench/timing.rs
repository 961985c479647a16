//! Throughput measurement: per-thread CPU time (the machine is shared with other builds, so
//! wall time is noisy), trials of at least a minimum duration, median over trials.

use std::time::Duration;

/// CPU time consumed by the calling thread so far.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant libc knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// How long and how often to measure.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Trials per measurement; the median is reported.
    pub trials: usize,
    /// Minimum CPU time of one trial.
    pub min_trial: Duration,
}

/// Median throughput in MB/s (10^6 bytes per CPU second) of `pass`, which processes
/// `bytes_per_pass` input bytes each call. Each trial repeats `pass` until `min_trial` of
/// thread CPU time has elapsed; one untimed pass warms caches first.
pub fn median_mb_per_s(plan: Plan, bytes_per_pass: usize, mut pass: impl FnMut()) -> f64 {
    pass();
    let mut rates: Vec<f64> = (0..plan.trials.max(1))
        .map(|_| {
            let start = thread_cpu_time();
            let mut passes = 0u64;
            let elapsed = loop {
                pass();
                passes += 1;
                let elapsed = thread_cpu_time().saturating_sub(start);
                if elapsed >= plan.min_trial {
                    break elapsed;
                }
            };
            (passes as f64 * bytes_per_pass as f64) / elapsed.as_secs_f64() / 1e6
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied().unwrap_or(0.0)
}
