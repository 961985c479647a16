//! The three OTLP signals and the flattened table schema of each (`sluice table create NAME
//! --otlp traces|logs|metrics`): one row per span, log record or metric data point. Every
//! table starts with the same columns — `record_id`, `time` (the item's time, µs), `date`
//! (its UTC day, for pruning by file statistics), `service_name` (resource attribute
//! `service.name`), the resource and the instrumentation scope as STRUCTs with VARIANT
//! attributes and their schema URLs — followed by the signal's own. Ids are lowercase hex,
//! enums their OTLP names (`SPAN_KIND_SERVER`), nanosecond times BIGINT, unsigned counts
//! BIGINT. A table is of a signal exactly when its columns are that signal's.

use std::sync::OnceLock;

use sluice_zeroparser::TableSchema;

/// One of the three OTLP signals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Spans (`/v1/traces`, `TraceService/Export`).
    Traces,
    /// Log records (`/v1/logs`, `LogsService/Export`).
    Logs,
    /// Metric data points (`/v1/metrics`, `MetricsService/Export`).
    Metrics,
}

const COMMON: &str = "record_id STRING NOT NULL, time TIMESTAMP NOT NULL, date DATE NOT NULL, \
service_name STRING, \
resource STRUCT<attributes: VARIANT, dropped_attributes_count: BIGINT>, \
resource_schema_url STRING, \
instrumentation_scope STRUCT<name: STRING, version: STRING, attributes: VARIANT, \
dropped_attributes_count: BIGINT>, \
scope_schema_url STRING";

const TRACES: &str = "trace_id STRING NOT NULL, span_id STRING NOT NULL, trace_state STRING, \
parent_span_id STRING, flags BIGINT, name STRING, kind STRING, \
start_time_unix_nano BIGINT, end_time_unix_nano BIGINT, attributes VARIANT, \
dropped_attributes_count BIGINT, \
events ARRAY<STRUCT<time_unix_nano: BIGINT, name: STRING, attributes: VARIANT, \
dropped_attributes_count: BIGINT>>, \
dropped_events_count BIGINT, \
links ARRAY<STRUCT<trace_id: STRING, span_id: STRING, trace_state: STRING, \
attributes: VARIANT, dropped_attributes_count: BIGINT, flags: BIGINT>>, \
dropped_links_count BIGINT, \
status STRUCT<message: STRING, code: STRING>";

const LOGS: &str = "time_unix_nano BIGINT, observed_time_unix_nano BIGINT, \
severity_number INT, severity_text STRING, body VARIANT, attributes VARIANT, \
dropped_attributes_count BIGINT, flags BIGINT, trace_id STRING, span_id STRING, \
event_name STRING";

const METRICS: &str = "name STRING, description STRING, unit STRING, metadata VARIANT, \
metric_type STRING NOT NULL, attributes VARIANT, start_time_unix_nano BIGINT, \
time_unix_nano BIGINT, flags BIGINT, \
exemplars ARRAY<STRUCT<time_unix_nano: BIGINT, value: DOUBLE, span_id: STRING, \
trace_id: STRING, filtered_attributes: VARIANT>>, \
value DOUBLE, aggregation_temporality STRING, is_monotonic BOOLEAN, \
histogram STRUCT<count: BIGINT, sum: DOUBLE, min: DOUBLE, max: DOUBLE, \
bucket_counts: ARRAY<BIGINT>, explicit_bounds: ARRAY<DOUBLE>>, \
exponential_histogram STRUCT<count: BIGINT, sum: DOUBLE, min: DOUBLE, max: DOUBLE, \
scale: INT, zero_count: BIGINT, zero_threshold: DOUBLE, positive_offset: INT, \
positive_bucket_counts: ARRAY<BIGINT>, negative_offset: INT, \
negative_bucket_counts: ARRAY<BIGINT>>, \
summary STRUCT<count: BIGINT, sum: DOUBLE, \
quantile_values: ARRAY<STRUCT<quantile: DOUBLE, value: DOUBLE>>>";

impl Signal {
    /// All three, in code order.
    pub const ALL: [Signal; 3] = [Signal::Traces, Signal::Logs, Signal::Metrics];

    /// `traces`, `logs` or `metrics` (the CLI's word and the HTTP path's).
    pub fn name(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Logs => "logs",
            Signal::Metrics => "metrics",
        }
    }

    /// The signal named `name` (`traces`, `logs`, `metrics`).
    pub fn parse(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The code in WAL frames: 1, 2, 3.
    pub fn code(self) -> u8 {
        match self {
            Signal::Traces => 1,
            Signal::Logs => 2,
            Signal::Metrics => 3,
        }
    }

    /// The signal of WAL code `code`.
    pub fn from_code(code: u8) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.code() == code)
    }

    /// What one item is called in OTLP's partial-success counts.
    pub fn items(self) -> &'static str {
        match self {
            Signal::Traces => "spans",
            Signal::Logs => "log records",
            Signal::Metrics => "data points",
        }
    }

    /// The table columns of this signal, as SQL text.
    pub fn columns_sql(self) -> String {
        let own = match self {
            Signal::Traces => TRACES,
            Signal::Logs => LOGS,
            Signal::Metrics => METRICS,
        };
        format!("{COMMON}, {own}")
    }

    /// The table schema of this signal (parsed once).
    pub fn schema(self) -> &'static TableSchema {
        static SCHEMAS: OnceLock<Vec<TableSchema>> = OnceLock::new();
        let all = SCHEMAS.get_or_init(|| {
            Signal::ALL
                .iter()
                // The texts above are constants that parse (pinned by the unit test below).
                .map(|s| {
                    TableSchema::parse(&s.columns_sql()).unwrap_or_else(|_| TableSchema {
                        columns: Vec::new(),
                    })
                })
                .collect()
        });
        &all[self.code() as usize - 1]
    }

    /// The signal whose table `schema` is (None: not an OTLP table).
    pub fn of_table(schema: &TableSchema) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.schema() == schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signal_schema_parses_and_is_told_apart() {
        for signal in Signal::ALL {
            let schema = TableSchema::parse(&signal.columns_sql()).expect("parses");
            assert!(schema.columns.len() > 10, "{}", signal.name());
            assert_eq!(Signal::of_table(&schema), Some(signal));
            assert_eq!(Signal::from_code(signal.code()), Some(signal));
            assert_eq!(Signal::parse(signal.name()), Some(signal));
        }
        let other = TableSchema::parse("id BIGINT").expect("parses");
        assert_eq!(Signal::of_table(&other), None);
    }
}
