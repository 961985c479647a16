//! The Zerobus gRPC service: stream set-up, per-stream ingest loops, acks.

mod inbound;
mod open;
mod service;
mod stream;

pub use service::IngestService;
