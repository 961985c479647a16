//! The ingest counters a table's writes move, looked up once per table. A
//! `metrics::counter!` with a `table` label builds its label string and finds
//! its handle in the registry on every call: with 5 000 streams of one-record
//! requests, once per record.

use metrics::{Counter, Histogram};

/// `sluice_table_records_total{table}`, `sluice_ingest_bytes_total`, and the stream
/// doors' `sluice_ingest_records_total` and `sluice_ingest_run_seconds`.
pub struct IngressMeters {
    table_records: Counter,
    bytes: Counter,
    stream_records: Counter,
    run_seconds: Histogram,
}

impl IngressMeters {
    /// The handles for `table`.
    pub fn for_table(table: &str) -> Self {
        IngressMeters {
            table_records: metrics::counter!("sluice_table_records_total", "table" => table.to_string()),
            bytes: metrics::counter!("sluice_ingest_bytes_total"),
            stream_records: metrics::counter!("sluice_ingest_records_total"),
            run_seconds: metrics::histogram!("sluice_ingest_run_seconds"),
        }
    }

    /// Counts `records` rows of `bytes` written to the table (any door).
    pub fn written(&self, records: usize, bytes: usize) {
        self.table_records.increment(records as u64);
        self.bytes.increment(bytes as u64);
    }

    /// Counts `records` of `bytes` taken in by a stream (Zerobus or Flight) and written.
    pub fn streamed(&self, records: usize, bytes: usize) {
        self.stream_records.increment(records as u64);
        self.written(records, bytes);
    }

    /// Records how long a stream's run took from being read to being logged.
    pub fn run_took(&self, took: std::time::Duration) {
        self.run_seconds.record(took.as_secs_f64());
    }
}
