//! The numbers a pod reports to the meta store every second: open streams (producer streams
//! and MQTT/Kafka connections, [`placed_streams`]), ingress bytes/s, CPU, WAL queue depth
//! and memtable bytes. Streams count ingress into [`LoadCounters`]; the [`LoadSampler`]
//! turns counters into rates between two reports; a [`LoadReporter`] reads a pod's
//! [`LoadSource`] and makes the report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_router::Load;
use sluice_wal::Wal;

use crate::journal::streams::StreamRegistry;
use crate::sink::Sinks;

/// Counters the data path bumps (one relaxed atomic add per run of records).
#[derive(Default)]
pub struct LoadCounters {
    ingress_bytes: AtomicU64,
    connections: AtomicU64,
}

/// One open MQTT or Kafka connection, counted in the pod's reported open streams until
/// dropped: the router places such a connection like a stream, so its score must see it.
pub struct OpenConnection(Arc<LoadCounters>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl LoadCounters {
    /// Counts an MQTT or Kafka connection until the returned guard is dropped.
    pub fn open_connection(self: &Arc<Self>) -> OpenConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(self))
    }

    /// MQTT and Kafka connections open now.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Counts record bytes received.
    pub fn record_ingress(&self, bytes: usize) {
        self.ingress_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Record bytes received since the pod started.
    pub fn ingress_total(&self) -> u64 {
        self.ingress_bytes.load(Ordering::Relaxed)
    }
}

/// Levels the sampler does not compute itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Levels {
    /// What the router placed here ([`placed_streams`]).
    pub open_streams: u64,
    /// WAL bytes queued, not yet durable.
    pub wal_queue_bytes: u64,
    /// Memtable bytes awaiting commit.
    pub memtable_bytes: u64,
}

struct Previous {
    at: Instant,
    ingress: u64,
    cpu_secs: f64,
    /// The rates of the last report that measured them (ingress bytes/s, CPU cores).
    rates: (f64, f64),
}

/// Rates are measured over at least this long. The process's CPU time moves in clock ticks
/// (10 ms), so over a few milliseconds one tick reads as several cores: a pod's second
/// report, a few ms after the one at its registration, once claimed 3–4 cores on a 2-core
/// machine, and the router kept new streams off the new pod for that report's second. A
/// report sooner than this repeats the last measured rates and keeps measuring from where
/// that measurement started.
const MIN_RATE_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// Turns cumulative counters into per-second rates.
pub struct LoadSampler {
    previous: Mutex<Option<Previous>>,
}

impl Default for LoadSampler {
    fn default() -> Self {
        LoadSampler {
            previous: Mutex::new(None),
        }
    }
}

impl LoadSampler {
    /// A load report from the counters now; rates cover the time since the last call.
    pub fn sample(&self, counters: &LoadCounters, levels: Levels) -> Load {
        let now = Instant::now();
        let ingress = counters.ingress_total();
        let cpu_secs = process_cpu_seconds().unwrap_or(0.0);
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        let (ingress_rate, cpu_cores) = match previous.as_mut() {
            Some(p) if now.duration_since(p.at) < MIN_RATE_WINDOW => p.rates,
            Some(p) => {
                let secs = now.duration_since(p.at).as_secs_f64();
                let rates = (
                    ingress.saturating_sub(p.ingress) as f64 / secs,
                    (cpu_secs - p.cpu_secs).max(0.0) / secs,
                );
                *p = Previous {
                    at: now,
                    ingress,
                    cpu_secs,
                    rates,
                };
                rates
            }
            None => {
                *previous = Some(Previous {
                    at: now,
                    ingress,
                    cpu_secs,
                    rates: (0.0, 0.0),
                });
                (0.0, 0.0)
            }
        };
        Load {
            open_streams: levels.open_streams,
            ingress_bytes_per_sec: ingress_rate,
            cpu_cores,
            wal_queue_bytes: levels.wal_queue_bytes,
            memtable_bytes: levels.memtable_bytes,
        }
    }
}

/// The parts of a pod a load report reads.
pub struct LoadSource {
    /// Ingress counted by the data path.
    pub counters: Arc<LoadCounters>,
    /// The WAL (its queue of bytes not yet durable).
    pub wal: Wal,
    /// The table sinks (their memtables).
    pub sinks: Arc<Sinks>,
    /// The streams (how many are open).
    pub streams: Arc<StreamRegistry>,
}

impl LoadSource {
    /// The levels now.
    pub fn levels(&self) -> Levels {
        let memtable: usize = self.sinks.all().iter().map(|s| s.memtable_bytes()).sum();
        Levels {
            open_streams: placed_streams(&self.streams, &self.counters),
            wal_queue_bytes: self.wal.queued_bytes(),
            memtable_bytes: memtable as u64,
        }
    }
}

/// What the router placed on this pod and a drain waits for: the streams producers hold
/// plus the open MQTT and Kafka connections. Not the pod's own internal REST streams
/// (`StreamRegistry::mark_internal`) that REST inserts and those connections write
/// through: one stays open per table for the pod's life, and counting it would count a
/// connection twice and keep a drained pod's score above zero.
pub fn placed_streams(streams: &StreamRegistry, counters: &LoadCounters) -> u64 {
    streams.producer_streams() as u64 + counters.connections()
}

/// Makes the load report a pod publishes every second in cluster mode.
pub struct LoadReporter {
    source: LoadSource,
    sampler: LoadSampler,
}

impl LoadReporter {
    /// A reporter over `source`; its first report has zero rates.
    pub fn new(source: LoadSource) -> Self {
        LoadReporter {
            source,
            sampler: LoadSampler::default(),
        }
    }

    /// The report now (rates since the previous one); also sets the per-pod metric the
    /// HPA scales on.
    pub fn report(&self) -> Load {
        let load = self
            .sampler
            .sample(&self.source.counters, self.source.levels());
        // The HPA's per-pod metric (deploy/k8s/hpa.yaml).
        metrics::gauge!("sluice_pod_load_score").set(sluice_router::placement::score(&load, 0));
        load
    }
}

/// User + system CPU time of this process, from `/proc/self/stat` (Linux); `None` elsewhere.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    Some((utime + stime) / ticks as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ingress_becomes_a_rate_between_two_samples() {
        let counters = LoadCounters::default();
        let sampler = LoadSampler::default();
        let first = sampler.sample(&counters, Levels::default());
        assert_eq!(first.ingress_bytes_per_sec, 0.0);
        counters.record_ingress(1 << 20);
        std::thread::sleep(MIN_RATE_WINDOW);
        let second = sampler.sample(&counters, Levels::default());
        assert!(second.ingress_bytes_per_sec > 0.0);
    }

    /// A report right after another (the pod's first two, at its registration) repeats the
    /// last measured rates instead of dividing a clock tick of CPU by a few milliseconds; the
    /// next report measures from where the last measurement started, so nothing is lost.
    #[test]
    fn a_report_sooner_than_the_window_repeats_the_last_rates() {
        let counters = LoadCounters::default();
        let sampler = LoadSampler::default();
        sampler.sample(&counters, Levels::default());
        counters.record_ingress(1 << 20);
        // Burn a few clock ticks of CPU inside a window far shorter than the minimum.
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let soon = sampler.sample(&counters, Levels::default());
        assert_eq!((soon.ingress_bytes_per_sec, soon.cpu_cores), (0.0, 0.0));
        std::thread::sleep(MIN_RATE_WINDOW);
        let later = sampler.sample(&counters, Levels::default());
        let secs = started.elapsed().as_secs_f64();
        // The MiB counted before the early report is in this one's rate.
        assert!(
            later.ingress_bytes_per_sec >= f64::from(1 << 20) / (secs + 0.1),
            "{later:?}"
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(later.cpu_cores <= cores + 0.1, "{later:?}");
    }

    #[test]
    fn an_open_connection_counts_until_it_is_dropped() {
        let counters = Arc::new(LoadCounters::default());
        let a = counters.open_connection();
        let b = counters.open_connection();
        assert_eq!(counters.connections(), 2);
        drop(a);
        assert_eq!(counters.connections(), 1);
        drop(b);
        assert_eq!(counters.connections(), 0);
    }

    #[test]
    fn placed_streams_count_producer_streams_and_connections_not_internal_streams() {
        let streams = StreamRegistry::default();
        let payload = Arc::new(Vec::new());
        streams.register(1, "main.s.t", payload.clone(), 10, true);
        streams.register(2, "main.s.t", payload.clone(), 20, true);
        streams.mark_internal(2);
        streams.register(3, "main.s.u", payload, 30, true);
        streams.closed(3);
        let counters = Arc::new(LoadCounters::default());
        let mqtt = counters.open_connection();
        let _kafka = counters.open_connection();
        // Producer stream 1 and the two connections; not internal stream 2 (which the
        // connections write through) nor closed stream 3.
        assert_eq!(placed_streams(&streams, &counters), 3);
        drop(mqtt);
        streams.closed(1);
        assert_eq!(placed_streams(&streams, &counters), 1);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(process_cpu_seconds().is_some_and(|s| s > 0.0));
    }
}
