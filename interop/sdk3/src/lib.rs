//! Test support for driving the official Rust Zerobus SDK 3.0.0 against Sluice: a real
//! `sluice serve` process ([`sluice`]), reading its Delta tables back with Python `polars`
//! ([`delta`]), and a recording Zerobus endpoint that shows what the SDK sends on a persistent
//! stream ([`recorder`]).

pub mod delta;
pub mod error;
pub mod recorder;
pub mod sluice;

pub use error::HarnessError;
