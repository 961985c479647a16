//! An OTLP export request of any signal: decoded from protobuf (the gRPC and
//! `application/x-protobuf` wire) or OTLP/JSON (`application/json`: lowercase hex trace and
//! span ids, 64-bit integers as decimal strings or numbers, enums as integers, camelCase
//! keys, unknown keys ignored — the serde mapping of the `opentelemetry-proto` crate), and
//! encoded back to protobuf for the WAL; its items counted and transcoded into rows.

use arrow_schema::SchemaRef;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use super::rows::{Rows, Transcoded};
use super::schema::Signal;
use super::{logs, metrics, traces};

/// A decoded export request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `TraceService/Export`, `/v1/traces`.
    Traces(ExportTraceServiceRequest),
    /// `LogsService/Export`, `/v1/logs`.
    Logs(ExportLogsServiceRequest),
    /// `MetricsService/Export`, `/v1/metrics`.
    Metrics(ExportMetricsServiceRequest),
}

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Protobuf (`application/x-protobuf`).
    Proto,
    /// OTLP/JSON (`application/json`).
    Json,
}

impl Request {
    /// Decodes a `signal` request encoded as `wire`.
    pub fn decode(signal: Signal, wire: Wire, bytes: &[u8]) -> Result<Request, String> {
        match wire {
            Wire::Proto => Request::decode_proto(signal, bytes),
            Wire::Json => Request::decode_json(signal, bytes),
        }
    }

    /// Decodes a protobuf-encoded `signal` request.
    pub fn decode_proto(signal: Signal, bytes: &[u8]) -> Result<Request, String> {
        let wrap =
            |e: prost::DecodeError| format!("the OTLP protobuf request does not decode: {e}");
        Ok(match signal {
            Signal::Traces => {
                Request::Traces(ExportTraceServiceRequest::decode(bytes).map_err(wrap)?)
            }
            Signal::Logs => Request::Logs(ExportLogsServiceRequest::decode(bytes).map_err(wrap)?),
            Signal::Metrics => {
                Request::Metrics(ExportMetricsServiceRequest::decode(bytes).map_err(wrap)?)
            }
        })
    }

    fn decode_json(signal: Signal, bytes: &[u8]) -> Result<Request, String> {
        let wrap = |e: serde_json::Error| format!("the OTLP/JSON request does not decode: {e}");
        Ok(match signal {
            Signal::Traces => Request::Traces(serde_json::from_slice(bytes).map_err(wrap)?),
            Signal::Logs => Request::Logs(serde_json::from_slice(bytes).map_err(wrap)?),
            Signal::Metrics => Request::Metrics(serde_json::from_slice(bytes).map_err(wrap)?),
        })
    }

    /// The request's signal.
    pub fn signal(&self) -> Signal {
        match self {
            Request::Traces(_) => Signal::Traces,
            Request::Logs(_) => Signal::Logs,
            Request::Metrics(_) => Signal::Metrics,
        }
    }

    /// The request as protobuf.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::Traces(r) => r.encode_to_vec(),
            Request::Logs(r) => r.encode_to_vec(),
            Request::Metrics(r) => r.encode_to_vec(),
        }
    }

    /// Spans, log records or data points in the request.
    pub fn items(&self) -> usize {
        match self {
            Request::Traces(r) => traces::count(r),
            Request::Logs(r) => logs::count(r),
            Request::Metrics(r) => metrics::count(r),
        }
    }

    /// The rows of the items that fit a table whose batches have `schema`; item `i` has
    /// offset `first_offset + i` in stream `stream_key`.
    pub fn transcode(
        &self,
        schema: SchemaRef,
        stream_key: u64,
        first_offset: i64,
        received_at_us: i64,
    ) -> Result<Transcoded, String> {
        let own = match self {
            Request::Traces(_) => traces::COLUMNS,
            Request::Logs(_) => logs::COLUMNS,
            Request::Metrics(_) => metrics::COLUMNS,
        };
        let mut rows = Rows::new(schema, own, stream_key, first_offset, received_at_us)?;
        match self {
            Request::Traces(r) => traces::transcode(r, &mut rows),
            Request::Logs(r) => logs::transcode(r, &mut rows),
            Request::Metrics(r) => metrics::transcode(r, &mut rows),
        }
        rows.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::metrics::v1::{
        metric::Data, number_data_point, Gauge, Histogram, HistogramDataPoint, Metric,
        NumberDataPoint, ResourceMetrics, ScopeMetrics,
    };
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use proptest::prelude::*;

    fn traces(spans: Vec<Span>) -> Request {
        Request::Traces(ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        })
    }

    fn rows_of(request: &Request) -> Transcoded {
        let schema = request.signal().schema().arrow_schema();
        request.transcode(schema, 9, 100, 1).expect("rows")
    }

    proptest! {
        #[test]
        fn every_span_is_a_row_or_counted_rejected(
            spans in proptest::collection::vec(
                (0usize..18, 0usize..10, any::<u64>(), "[a-z]{0,8}"), 0..20)
        ) {
            let fits = spans
                .iter()
                .filter(|(t, s, start, _)| *t == 16 && *s == 8 && *start <= i64::MAX as u64)
                .count();
            let request = traces(
                spans
                    .iter()
                    .map(|(t, s, start, name)| Span {
                        trace_id: vec![1; *t],
                        span_id: vec![2; *s],
                        start_time_unix_nano: *start,
                        name: name.clone(),
                        ..Default::default()
                    })
                    .collect(),
            );
            prop_assert_eq!(request.items(), spans.len());
            let rows = rows_of(&request);
            prop_assert_eq!(rows.batch.num_rows(), fits);
            prop_assert_eq!(rows.rejected as usize, spans.len() - fits);
            prop_assert_eq!(rows.message.is_some(), fits < spans.len());
            prop_assert!(rows.offsets.iter().all(|o| (100..100 + spans.len() as i64).contains(o)));
            let decoded = Request::decode_proto(Signal::Traces, &request.encode());
            prop_assert_eq!(decoded, Ok(request.clone()));
            let json = match &request {
                Request::Traces(r) => serde_json::to_vec(r).expect("json"),
                _ => unreachable!(),
            };
            prop_assert_eq!(Request::decode(Signal::Traces, Wire::Json, &json), Ok(request));
        }
    }

    #[test]
    fn metric_points_that_do_not_fit_are_counted_with_the_first_reason() {
        let number = |value| NumberDataPoint {
            value,
            ..Default::default()
        };
        let request = Request::Metrics(ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![
                        Metric {
                            name: "g".into(),
                            data: Some(Data::Gauge(Gauge {
                                data_points: vec![
                                    number(Some(number_data_point::Value::AsInt(3))),
                                    number(None),
                                ],
                            })),
                            ..Default::default()
                        },
                        Metric {
                            name: "h".into(),
                            data: Some(Data::Histogram(Histogram {
                                data_points: vec![HistogramDataPoint {
                                    bucket_counts: vec![1, 2],
                                    explicit_bounds: vec![1.0, 2.0],
                                    ..Default::default()
                                }],
                                aggregation_temporality: 2,
                            })),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        });
        assert_eq!(request.items(), 3);
        let rows = rows_of(&request);
        assert_eq!((rows.batch.num_rows(), rows.rejected), (1, 2));
        assert_eq!(
            rows.message.as_deref(),
            Some("data point 1: metric `g`: the point has no value (as_double or as_int)")
        );
        assert_eq!(rows.offsets, vec![100]);
    }
}
