//! The Zerobus gRPC service: stream set-up, per-stream ingest loops, acks.

mod acks;
pub mod handover;
mod inbound;
pub(crate) mod open;
mod persistent;
mod persistent_open;
mod request;
mod run;
mod service;
mod stream;

pub use service::IngestService;
