//! OpenTelemetry (OTLP) ingest: the collector services' `Export` over gRPC
//! (`opentelemetry.proto.collector.{trace,logs,metrics}.v1`, [`grpc`]) and OTLP/HTTP
//! (`POST /v1/traces|logs|metrics`, `http/otlp.rs`) into tables created with `sluice
//! table create NAME --otlp traces|logs|metrics` ([`schema`]). Requests are decoded with
//! the prost types of the official definitions ([`request`]), transcoded item by item
//! into the table's Arrow columns ([`columns`], [`rows`], [`traces`], [`logs`],
//! [`metrics`], VARIANT text by [`variant`]), logged as one WAL frame and answered once
//! it is durable ([`export`]), with OTLP partial success for the items that do not fit
//! ([`response`]); start-up replay transcodes logged requests again ([`replay`]).

pub mod columns;
pub mod export;
pub mod grpc;
pub mod logs;
pub mod metrics;
pub mod replay;
pub mod request;
pub mod response;
pub mod rows;
pub mod schema;
pub mod traces;
pub mod variant;

pub use crate::config::DefaultTables;
pub use export::{export, Exported, OtlpIngest};
pub use request::{Request, Wire};
pub use schema::Signal;
