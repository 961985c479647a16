//! Limits a pod enforces on its clients, with the defaults a user of the
//! official Zerobus SDKs would expect, and the bookkeeping of open streams.
//!
//! Every refusal is RESOURCE_EXHAUSTED with a message naming the limit and
//! the flag that changes it. Limits on volume that a well-behaved producer
//! reaches in normal operation (in-flight bytes, rate limits) apply
//! back-pressure instead: the stream is simply not read for a while, and
//! HTTP/2 flow control pushes back on the producer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Result, ServerError};

/// The limits of one pod.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest single record (`--max-record-bytes`). Default: 10 MiB, what
    /// the official SDKs assume.
    pub max_record_bytes: usize,
    /// Open streams on this pod (`--max-streams`). Default: 4096.
    pub max_streams: usize,
    /// Open streams of one principal (`--max-streams-per-principal`).
    /// Default: 1024.
    pub max_streams_per_principal: usize,
    /// Record bytes of a stream logged but not yet acked before the stream
    /// stops being read (`--max-inflight-bytes`). Default: 64 MiB.
    pub max_inflight_bytes: usize,
    /// A stream that sends nothing for this long, with nothing left to ack,
    /// is closed (`--idle-stream-timeout`). Default: 15 min.
    pub idle_stream_timeout: Duration,
    /// HTTP/2 streams per connection (`--h2-max-concurrent-streams`).
    /// Default: 1024.
    pub h2_max_concurrent_streams: u32,
    /// Largest HTTP/2 header list (`--h2-max-header-bytes`). Default: 16 KiB.
    pub h2_max_header_bytes: u32,
    /// Records per second per principal (`--rate-records`); 0 = no limit.
    /// Default: 0.
    pub rate_records_per_sec: u64,
    /// Record bytes per second per principal (`--rate-bytes`); 0 = no limit.
    /// Default: 0.
    pub rate_bytes_per_sec: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record_bytes: 10 << 20,
            max_streams: 4096,
            max_streams_per_principal: 1024,
            max_inflight_bytes: 64 << 20,
            idle_stream_timeout: Duration::from_secs(15 * 60),
            h2_max_concurrent_streams: 1024,
            h2_max_header_bytes: 16 << 10,
            rate_records_per_sec: 0,
            rate_bytes_per_sec: 0,
        }
    }
}

impl Limits {
    /// Rejects limits that cannot work with a request size of `max_request`.
    pub fn sanitize(&self, max_request: usize) -> Result<()> {
        let bad = |m: &str| Err(ServerError::Config(m.to_string()));
        if self.max_record_bytes == 0 || self.max_record_bytes > max_request {
            return bad("--max-record-bytes must be > 0 and <= --max-request-bytes");
        }
        if self.max_streams == 0 || self.max_streams_per_principal == 0 {
            return bad("--max-streams and --max-streams-per-principal must be > 0");
        }
        if self.max_inflight_bytes < max_request {
            return bad("--max-inflight-bytes must be >= --max-request-bytes");
        }
        if self.idle_stream_timeout < Duration::from_secs(1) {
            return bad("--idle-stream-timeout must be >= 1s");
        }
        if self.h2_max_concurrent_streams == 0 || self.h2_max_header_bytes < 1024 {
            return bad("--h2-max-concurrent-streams must be > 0, --h2-max-header-bytes >= 1024");
        }
        Ok(())
    }
}

/// The `sluice serve` flags of the limits (defaults as in [`Limits`]).
#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// Largest gRPC request, bytes (the official SDKs send at most 10 MiB - 64 KiB).
    #[arg(long, default_value_t = 10 << 20)]
    pub max_request_bytes: usize,
    /// Largest single record, bytes.
    #[arg(long, default_value_t = 10 << 20)]
    pub max_record_bytes: usize,
    /// Open streams on this pod.
    #[arg(long, default_value_t = 4096)]
    pub max_streams: usize,
    /// Open streams of one principal.
    #[arg(long, default_value_t = 1024)]
    pub max_streams_per_principal: usize,
    /// Record bytes of one stream logged but not yet acked before it stops being read.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_inflight_bytes: usize,
    /// Close a stream that sent nothing for this long (e.g. 15m).
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    pub idle_stream_timeout: Duration,
    /// HTTP/2 streams per connection.
    #[arg(long, default_value_t = 1024)]
    pub h2_max_concurrent_streams: u32,
    /// Largest HTTP/2 header list, bytes.
    #[arg(long, default_value_t = 16 << 10)]
    pub h2_max_header_bytes: u32,
    /// Records per second per principal (0: no limit); streams are throttled.
    #[arg(long, default_value_t = 0)]
    pub rate_records: u64,
    /// Record bytes per second per principal (0: no limit); streams are throttled.
    #[arg(long, default_value_t = 0)]
    pub rate_bytes: u64,
}

impl LimitArgs {
    /// The limits these flags ask for.
    pub fn limits(&self) -> Limits {
        Limits {
            max_record_bytes: self.max_record_bytes,
            max_streams: self.max_streams,
            max_streams_per_principal: self.max_streams_per_principal,
            max_inflight_bytes: self.max_inflight_bytes,
            idle_stream_timeout: self.idle_stream_timeout,
            h2_max_concurrent_streams: self.h2_max_concurrent_streams,
            h2_max_header_bytes: self.h2_max_header_bytes,
            rate_records_per_sec: self.rate_records,
            rate_bytes_per_sec: self.rate_bytes,
        }
    }
}

/// A principal may run ahead of its rate by this much before it waits.
const RATE_BURST: Duration = Duration::from_secs(1);

/// Counts open streams, per pod and per principal, and paces principals
/// that have a rate limit.
#[derive(Default)]
pub struct StreamSlots {
    open: Mutex<(usize, HashMap<String, usize>)>,
    pace: Mutex<HashMap<String, Pace>>,
}

/// When a principal's records and bytes so far are "paid for" at its rate
/// (a theoretical arrival time, as in GCRA).
#[derive(Default)]
struct Pace {
    records: Option<Instant>,
    bytes: Option<Instant>,
}

/// Books `amount` at `rate`/s on `tat`; returns how long to wait.
fn book(tat: &mut Option<Instant>, now: Instant, amount: u64, rate: u64) -> Duration {
    if rate == 0 {
        return Duration::ZERO;
    }
    let start = tat.map_or(now, |t| t.max(now));
    let next = start + Duration::from_secs_f64(amount as f64 / rate as f64);
    *tat = Some(next);
    next.saturating_duration_since(now + RATE_BURST)
}

/// One open stream's slot; dropping it frees the slot.
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    principal: String,
}

impl StreamSlots {
    /// Takes a slot for a stream of `principal`, or says which limit is hit.
    pub fn acquire(self: &Arc<Self>, principal: &str, limits: &Limits) -> Result<StreamSlot> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| ServerError::Internal("stream slots lock poisoned".into()))?;
        if open.0 >= limits.max_streams {
            return Err(ServerError::ResourceExhausted(format!(
                "too many streams: this pod serves at most {} open streams (--max-streams); \
                 retry later or on another pod",
                limits.max_streams
            )));
        }
        let mine = open.1.get(principal).copied().unwrap_or(0);
        if mine >= limits.max_streams_per_principal {
            return Err(ServerError::ResourceExhausted(format!(
                "too many streams: principal `{principal}` already has {mine} open streams, \
                 the limit is {} (--max-streams-per-principal)",
                limits.max_streams_per_principal
            )));
        }
        open.0 += 1;
        *open.1.entry(principal.to_string()).or_insert(0) += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            principal: principal.to_string(),
        })
    }
}

impl StreamSlots {
    /// How long `principal` must wait before `records` / `bytes` more.
    fn delay(&self, principal: &str, limits: &Limits, records: u64, bytes: u64) -> Duration {
        if limits.rate_records_per_sec == 0 && limits.rate_bytes_per_sec == 0 {
            return Duration::ZERO;
        }
        let Ok(mut pace) = self.pace.lock() else {
            return Duration::ZERO;
        };
        let p = pace.entry(principal.to_string()).or_default();
        let now = Instant::now();
        let r = book(&mut p.records, now, records, limits.rate_records_per_sec);
        let b = book(&mut p.bytes, now, bytes, limits.rate_bytes_per_sec);
        r.max(b)
    }
}

impl StreamSlot {
    /// Waits as long as the principal's rate limits (`--rate-records`,
    /// `--rate-bytes`) ask before `records` / `bytes` more are taken.
    pub async fn throttle(&self, limits: &Limits, records: u64, bytes: u64) {
        let wait = self.slots.delay(&self.principal, limits, records, bytes);
        if !wait.is_zero() {
            metrics::counter!("sluice_rate_limited_waits_total").increment(1);
            tokio::time::sleep(wait).await;
        }
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.slots.open.lock() {
            open.0 = open.0.saturating_sub(1);
            if let Some(n) = open.1.get_mut(&self.principal) {
                *n -= 1;
                if *n == 0 {
                    open.1.remove(&self.principal);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_principal_and_freed_on_drop() {
        let limits = Limits {
            max_streams: 3,
            max_streams_per_principal: 2,
            ..Limits::default()
        };
        let slots = Arc::new(StreamSlots::default());
        let a1 = slots.acquire("a", &limits).expect("a1");
        let _a2 = slots.acquire("a", &limits).expect("a2");
        let err = slots.acquire("a", &limits).err().expect("a3 refused");
        assert!(
            err.to_string().contains("--max-streams-per-principal"),
            "{err}"
        );
        let _b1 = slots.acquire("b", &limits).expect("b1");
        let err = slots.acquire("b", &limits).err().expect("pod full");
        assert!(err.to_string().contains("--max-streams)"), "{err}");
        drop(a1);
        slots.acquire("b", &limits).expect("slot freed");
        assert!(Limits::default().sanitize(10 << 20).is_ok());
    }

    #[test]
    fn a_principal_over_its_rate_waits_after_a_one_second_burst() {
        let limits = Limits {
            rate_records_per_sec: 100,
            rate_bytes_per_sec: 1000,
            ..Limits::default()
        };
        let slots = StreamSlots::default();
        assert!(
            slots.delay("p", &limits, 100, 10).is_zero(),
            "within the burst"
        );
        let wait = slots.delay("p", &limits, 100, 10);
        assert!(wait > Duration::from_millis(900), "{wait:?}");
        assert!(
            slots.delay("q", &limits, 1, 1).is_zero(),
            "principals are apart"
        );
        let wait = slots.delay("q", &limits, 1, 3000);
        assert!(
            wait > Duration::from_millis(1900),
            "bytes pace too: {wait:?}"
        );
        assert!(StreamSlots::default()
            .delay("r", &Limits::default(), 1 << 30, 1 << 40)
            .is_zero());
    }
}
