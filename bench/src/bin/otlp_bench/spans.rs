//! The spans the Rust load generator sends: export requests of `per_request` server spans
//! shaped like an instrumented HTTP service's (8 attributes, one event, a parent), with a
//! resource naming one of 50 services; ids differ per span.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Value::StringValue(value.into()))
}

/// Request `n` of a client (`seed` tells clients apart): `per_request` spans.
pub fn request(seed: u64, n: u64, per_request: usize) -> ExportTraceServiceRequest {
    let base = (seed << 40) | (n << 16);
    let spans = (0..per_request as u64)
        .map(|i| {
            let id = base + i;
            let start = 1_764_800_000_000_000_000 + id % 1_000_000_000;
            Span {
                trace_id: [(id / 32).to_le_bytes(), seed.to_le_bytes()].concat(),
                span_id: id.to_be_bytes().to_vec(),
                parent_span_id: (id | 0xffff).to_be_bytes().to_vec(),
                name: format!("GET /api/v1/items/{}", id % 997),
                kind: SpanKind::Server as i32,
                start_time_unix_nano: start,
                end_time_unix_nano: start + 1_500_000,
                attributes: vec![
                    text("http.request.method", "GET"),
                    text("http.route", "/api/v1/items/{id}"),
                    kv("http.response.status_code", Value::IntValue(200)),
                    text("client.address", "10.1.2.3"),
                    text("user_agent.original", "bench/1.0 (linux)"),
                    text("db.system", "postgresql"),
                    kv("cache.hit", Value::BoolValue(id.is_multiple_of(3))),
                    kv("payload.ratio", Value::DoubleValue(0.25)),
                ],
                events: vec![Event {
                    time_unix_nano: start + 500_000,
                    name: "db.query.done".into(),
                    attributes: vec![kv("db.rows", Value::IntValue(12))],
                    ..Default::default()
                }],
                status: Some(Status {
                    message: String::new(),
                    code: 1,
                }),
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text("service.name", &format!("svc-{:02}", (seed + n) % 50)),
                    text("service.version", "1.4.2"),
                    text("deployment.environment", "bench"),
                    text("host.name", "node-7"),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "bench.http".into(),
                    version: "0.1".into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}
