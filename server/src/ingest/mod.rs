//! The Zerobus gRPC service: stream set-up, per-stream ingest loops, acks.

pub(crate) mod acks;
mod auto_evolve;
pub mod handover;
pub(crate) mod inbound;
pub(crate) mod open;
mod persistent;
mod persistent_open;
mod request;
pub(crate) mod run;
pub(crate) mod service;
pub(crate) mod signals;
pub(crate) mod stream;

pub use service::IngestService;
