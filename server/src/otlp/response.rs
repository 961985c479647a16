//! The answer to an accepted export, per signal: OTLP partial success (the rejected
//! count and the first reason) when an item was refused, an empty response otherwise;
//! encoded as protobuf or OTLP/JSON for HTTP.

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;

use super::export::Exported;
use super::request::Wire;
use super::schema::Signal;

/// `TraceService/Export`'s answer.
pub fn traces(out: Exported) -> ExportTraceServiceResponse {
    ExportTraceServiceResponse {
        partial_success: (out.rejected > 0).then_some(ExportTracePartialSuccess {
            rejected_spans: out.rejected,
            error_message: out.message,
        }),
    }
}

/// `LogsService/Export`'s answer.
pub fn logs(out: Exported) -> ExportLogsServiceResponse {
    ExportLogsServiceResponse {
        partial_success: (out.rejected > 0).then_some(ExportLogsPartialSuccess {
            rejected_log_records: out.rejected,
            error_message: out.message,
        }),
    }
}

/// `MetricsService/Export`'s answer.
pub fn metrics(out: Exported) -> ExportMetricsServiceResponse {
    ExportMetricsServiceResponse {
        partial_success: (out.rejected > 0).then_some(ExportMetricsPartialSuccess {
            rejected_data_points: out.rejected,
            error_message: out.message,
        }),
    }
}

/// The answer of a `signal` export as an HTTP body in `wire`.
pub fn body(signal: Signal, out: Exported, wire: Wire) -> Vec<u8> {
    fn encode<T: Message + serde::Serialize>(response: T, wire: Wire) -> Vec<u8> {
        match wire {
            Wire::Proto => response.encode_to_vec(),
            Wire::Json => serde_json::to_vec(&response).unwrap_or_else(|_| b"{}".to_vec()),
        }
    }
    match signal {
        Signal::Traces => encode(traces(out), wire),
        Signal::Logs => encode(logs(out), wire),
        Signal::Metrics => encode(metrics(out), wire),
    }
}
