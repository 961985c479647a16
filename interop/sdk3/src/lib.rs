//! Test support for driving the official Rust Zerobus SDK 3.0.0 against Sluice: a real
//! `sluice serve` process ([`sluice`]), reading its Delta tables back with Python `polars`
//! ([`delta`]), a recording Zerobus endpoint that shows what the SDK sends on a persistent
//! stream ([`recorder`]), and a real cluster (etcd, pods, router: [`cluster`]).

pub mod cluster;
pub mod delta;
pub mod error;
pub mod recorder;
pub mod sluice;

pub use error::HarnessError;
