//! Arrow Flight ingest: `arrow.flight.protocol.FlightService/DoPut` on the pod's gRPC port,
//! the door the official Zerobus SDKs open with `create_arrow_stream`. The table comes from
//! the `x-databricks-zerobus-table-name` header; the caller's Bearer token and table rights
//! are checked as for Zerobus streams.
//!
//! `service` answers the gRPC calls, `stream` runs one `DoPut`, `ipc` decodes Arrow IPC
//! messages (also for replay), `conform` fits a stream's schema and batches to the table,
//! `wire` is the `app_metadata` JSON.

pub mod conform;
pub mod ipc;
mod service;
mod stream;
pub mod wire;

pub use service::FlightIngest;
